/*
 * reload.h - re-read the cluster file at run time (SIGHUP, `ramsterctl
 * reload`) and apply what can change safely; say which changed keys need a
 * restart.
 *
 * Applied at once: the keys whose row in node/config_keys.c says so (the
 * node's log_level and donate_mb, the [cluster] tunables, the NBD TLS key
 * files, the per-uid rules and client limits; `ramsterd --help-config` lists
 * every key's rule); a [node] section added to the file (the collective
 * links to it without a restart) or removed (once that node holds none of
 * our pages: drained). Everything else that changed is named in the log (and
 * the reply) as needing a restart, and left as it runs. A file that does not
 * load changes nothing. Loop thread only.
 */
#ifndef RAMSTER_NODE_RELOAD_H
#define RAMSTER_NODE_RELOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "node/config.h"

struct remote;
struct reload;

#define RELOAD_TEXT_MAX 1024

/* What a reload did, as text ("" when nothing): for the log and the reply. */
struct reload_result {
	char applied[RELOAD_TEXT_MAX]; /* "donate_mb 64 -> 128, high_watermark 90 -> 85" */
	char restart[RELOAD_TEXT_MAX]; /* "local_mb 64 -> 128" */
	char error[CONFIG_ERR_MAX];    /* why nothing changed, on failure */
};

/*
 * Reload path (the file the node started from) for node name into cur (the
 * configuration that runs; updated in place for what is applied; it and
 * remote - NULL for a lone node - outlive the object). level_from_flag: the
 * command line set the log level, which then wins over the file's.
 * @return the object, or NULL (ENOMEM).
 */
struct reload;
struct users;
struct tmem;

/*
 * The per-uid records and the tier whose owners' weights follow a reload of
 * the [limits] client keys and the [uid]/[user]/[group] rules (both outlive
 * rl). Without it those changes need a restart.
 */
void reload_set_users(struct reload *rl, struct users *users, struct tmem *t);

struct nbd;

/* The NBD server whose TLS keys a reload reads again (outlives rl; NULL: none). */
void reload_set_nbd(struct reload *rl, struct nbd *nbd);

struct reload *reload_create(const char *path, const char *name, struct config *cur,
			     bool level_from_flag, struct remote *remote);
void reload_destroy(struct reload *rl); /* NULL ok */

/* Reload now (SIGHUP). Logs what changed. @return 0, or -errno with res->error set. */
int reload_run(struct reload *rl, struct reload_result *res);

/* The same asked by a client of uid: only root or the daemon's own uid
 * (else -EPERM, counted). rl NULL (no file): -ENOENT. */
int reload_request(struct reload *rl, uid_t uid, struct reload_result *res);

/* Counters "reload_...". */
void reload_foreach_stat(const struct reload *rl,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg);

#endif /* RAMSTER_NODE_RELOAD_H */
