/*
 * config.h - the node's configuration: command-line flags and the one
 * cluster file (INI, parsed with inih), identical on every node.
 *
 * The file has a [cluster] section (collective-wide settings), one
 * [node NAME] section per node, and [export NAME] sections (NBD exports).
 * Each key is a row of node/config_keys.c: its field here, its bounds,
 * default, help and reload rule there.
 * A single node without a collective uses the same file with just its own
 * [node NAME] section. Every value is checked; an error names file, line and
 * problem and stops start-up. Flags given on the command line override the
 * file for the node that runs.
 */
#ifndef RAMSTER_CONFIG_H
#define RAMSTER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_NAME_MAX 64
#define CONFIG_PATH_MAX 256
#define CONFIG_NODES_MAX 64      /* node ids are 1..CONFIG_NODES_MAX */
#define CONFIG_EXPORTS_MAX 64
#define CONFIG_ERR_MAX 512

#define CONFIG_AUTO UINT64_MAX /* donate_mb = auto: node/elastic/ decides */
#define CONFIG_DEFAULT_LOCAL_MB	       256    /* also without a file (node/main.c) */
#define CONFIG_DEFAULT_ORPHAN_AFTER_MS 600000 /* docs/operations.md: why ten minutes */
#define CONFIG_DEFAULT_BUSY_POLL_US 50 /* node/spin.h */
#define CONFIG_BUSY_POLL_MAX_US	    10000

enum config_transport { TRANSPORT_TCP = 0, TRANSPORT_RDMA = 1, TRANSPORT_AUTO = 2 };

/*
 * nbd_tls: TLS on the NBD TCP listener (NBD_OPT_STARTTLS). UNSET behaves as
 * OFF but refuses a non-loopback nbd_listen (node/nbd/nbd.c); ON offers TLS and
 * lets plaintext clients in; REQUIRE refuses them on TCP (the unix socket
 * may stay plaintext).
 */
enum config_nbd_tls { NBD_TLS_UNSET = 0, NBD_TLS_OFF, NBD_TLS_ON, NBD_TLS_REQUIRE };

struct config_node {
	char name[CONFIG_NAME_MAX];
	uint32_t id;                    /* 1..CONFIG_NODES_MAX, unique */
	char host[CONFIG_NAME_MAX];     /* address = HOST:PORT (IPv4 literal or name) */
	uint16_t port;
	enum config_transport transport;
	char socket[CONFIG_PATH_MAX];   /* local client socket ("" = default) */
	uint64_t local_mb;              /* local compressed tier; CONFIG_AUTO: elastic */
	uint64_t local_min_mb, local_max_mb; /* auto: its bounds (max 0: a quarter of the RAM) */
	uint64_t donate_mb;             /* RAM lent to peers' pages; CONFIG_AUTO: elastic */
	uint64_t donate_min_mb, donate_max_mb; /* auto: its bounds (max 0: half the RAM) */
	uint64_t reserve_mb;            /* auto: what the host always keeps (0: a 16th, >= 256) */
	uint32_t pressure_target;       /* auto: memory stall, us per s of wall time */
	bool bring_home;                /* read pages on peers home while there is room */
	char nbd_socket[CONFIG_PATH_MAX];
	char nbd_listen[CONFIG_NAME_MAX];
	unsigned nbd_tls;               /* enum config_nbd_tls */
	char nbd_tls_psk[CONFIG_PATH_MAX];          /* psktool's username:hexkey file ("" = none) */
	char nbd_tls_certificates[CONFIG_PATH_MAX]; /* dir: ca-cert.pem, server-{cert,key}.pem */
	int nbd_tls_line;               /* where nbd_tls (or the section) is */
	char metrics_listen[CONFIG_NAME_MAX + 8]; /* HOST:PORT of /metrics ("" = none) */
	char crash_dir[CONFIG_PATH_MAX];  /* the tier's files a crash leaves ("" = none) */
	uint64_t busy_poll_us;          /* the loop polls this long before sleeping (0 = off) */
	unsigned allocator;             /* enum zalloc_kind: dense (default) or zbud */
	unsigned compressor;            /* enum compress_algo: lzo (default) or lz4 */
	int log_level;                  /* enum log_level, -1 = not set (--log-level, else info) */
	int line;                       /* where the section starts */
};

struct config_export {
	char name[CONFIG_NAME_MAX];
	uint64_t size;                  /* bytes, a multiple of 4096 */
	char backing[CONFIG_PATH_MAX];  /* "" = none */
	int line;
};

/*
 * The environment knobs of ramsterd, read once at start (config_env_read)
 * and nowhere else: RAMSTER_SOCKET, RAMSTER_BUSY_POLL_US,
 * RAMSTER_FRAME_TIMEOUT_MS, RAMSTER_RDMA_READ, RAMSTER_NO_MEMLOCK, and for the
 * hostile tests only RAMSTER_TEST_HOLDER_LIE (other, old or garbage: as a holder
 * this node answers gets with another page, the first version it held, or
 * changed bytes; docs/security.md).
 */
enum { HOLDER_LIE_NONE, HOLDER_LIE_OTHER, HOLDER_LIE_OLD, HOLDER_LIE_GARBAGE };
struct config_env {
	char socket[CONFIG_PATH_MAX];   /* "" = unset */
	bool has_busy_poll;
	uint64_t busy_poll_us;          /* overrides the node's busy_poll_us when has_busy_poll */
	uint32_t frame_timeout_ms;      /* a client frame's limit to arrive whole (default 30000) */
	bool rdma_read;                 /* one-sided repatriate reads (default true) */
	bool no_memlock;                /* skip mlockall and the I/O flusher mark */
	int holder_lie;                 /* HOLDER_LIE_*: test only */
};

/*
 * [limits]: the node's bounds on what clients may make it hold (docs/operations.md,
 * "Users and limits"). Every key has a default; 0 is never "unlimited".
 */
struct config_limits {
	uint32_t max_clients;               /* client connections at once (default 1024) */
	uint32_t max_clients_per_uid;       /* ... of one uid (default 64) */
	uint32_t max_pools_per_uid;         /* pools one uid owns at once (default 4096) */
	uint32_t default_weight;            /* weight of a uid without a rule (default 100) */
	uint32_t nbd_max_connections;       /* NBD connections at once (default 64) */
	uint32_t nbd_handshake_timeout_ms;  /* an NBD handshake's limit (default 10000) */
	uint32_t nbd_idle_timeout_ms;       /* an idle NBD connection's limit (default 600000) */
	uint32_t peer_unauth_max;           /* peer links not yet authenticated (default 32) */
	uint32_t peer_unauth_per_addr;      /* ... from one source address (default 4) */
	uint32_t peer_handshake_timeout_ms; /* a peer handshake's limit (default 3000) */
	uint32_t reattach_grace_ms;         /* pools kept for a reconnect (default 30000, 0: none) */

};

#define CONFIG_USERS_MAX 64

/* [uid N], [user NAME] or [group NAME]: one rule for the clients it matches. */
struct config_user {
	bool group;                     /* [group NAME]: id is a gid; else a uid */
	uint32_t id;
	char name[CONFIG_NAME_MAX];     /* as written in the header */
	uint64_t max_mb;                /* pages held, local and remote (0: no quota) */
	uint32_t weight;                /* share of the tier under contention (1..10000) */
	uint32_t max_connections;       /* 0: [limits] max_clients_per_uid */
	uint32_t max_pools;             /* 0: [limits] max_pools_per_uid */
	int line;
};

struct config {
	char path[CONFIG_PATH_MAX];     /* the file ("" when none) */
	struct config_limits limits;
	size_t n_users;
	struct config_user users[CONFIG_USERS_MAX];
	/* [cluster] */
	bool has_cluster;
	char cluster_name[CONFIG_NAME_MAX];
	char secret_file[CONFIG_PATH_MAX];
	uint32_t heartbeat_ms;          /* default 100 */
	uint32_t dead_after_ms;         /* default 1000 */
	uint32_t replicas;              /* copies of a remote persistent page (default 1) */
	char redundancy[24];            /* as written: "replicas N" or "ec K+M" (config_check.c) */
	uint32_t ec_k, ec_m;            /* redundancy = ec K+M: data and parity fragments; 0 0: copies */
	bool ec_stripes;                /* ec_layout = stripes: code across K pages (default pages) */
	uint32_t ec_read_extra;         /* fragments asked beyond K on a read (default 0) */
	bool link_integrity_only;       /* link_security = integrity: MAC, no encryption (default secure) */
	uint32_t rereplicate_rate;      /* copies re-made a second at most (default 2000) */
	uint32_t high_watermark_pct;    /* remotify above this % of local_mb (default 90) */
	uint32_t low_watermark_pct;     /* ... until below this (default 80) */
	bool remotify_ephemeral;        /* default true */
	bool remotify_persistent;       /* default true */
	uint32_t request_timeout_ms;    /* a remote request's limit (default dead_after_ms) */
	uint32_t room_wait_ms;          /* a full tier's put waits this long for room (default 500) */
	uint32_t orphan_after_ms;       /* an unreachable peer's lease (default 600000) */
	/* compression thresholds in 1/1024ths of a page (0 = default) */
	uint32_t pers_max_frac, pers_mean_max_frac, pers_mean_limit_frac;
	/* nodes and exports */
	size_t n_nodes;
	struct config_node nodes[CONFIG_NODES_MAX];
	size_t n_exports;
	struct config_export exports[CONFIG_EXPORTS_MAX];
	/* not from the file: the environment (config_env_read; defaults here) */
	struct config_env env;
};

/*
 * Read the environment into e. @return 0, or -EINVAL with err set to
 * "VARIABLE: problem" (the daemon refuses to start).
 */
int config_env_read(struct config_env *e, char *err, size_t errlen);

/* Fill c with the defaults (no file, no nodes). */
void config_defaults(struct config *c);

/*
 * Parse path into c (defaults first) and check it whole: known sections and
 * keys, numbers in range, unique node names/ids/addresses, a readable
 * secret_file when there is more than one node, nbd_tls = on|require with
 * exactly one of nbd_tls_psk and nbd_tls_certificates (relative paths are
 * made relative to the file's directory; the files are read by nbd_create). @return 0, or -EINVAL with
 * err set to "FILE:LINE: problem".
 */
int config_load(struct config *c, const char *path, char *err, size_t errlen);

/* @return the node named name, or NULL. */
const struct config_node *config_find_node(const struct config *c, const char *name);

/*
 * Parse a size with an optional K/M/G/T suffix (powers of 1024).
 * @return 0, or -EINVAL on junk, overflow or a negative number.
 */
int config_parse_size(const char *s, uint64_t *out);

#endif /* RAMSTER_CONFIG_H */
