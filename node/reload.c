/*
 * reload.c - the cluster file re-read at run time (reload.h).
 *
 * The new file is loaded and checked whole (config_load) before anything is
 * touched; then each key is compared with what runs, as its row's reload
 * rule says (node/config_keys.c). A key that applies is copied into the
 * running configuration and pushed to its module (remote_set_tunables,
 * log_set_level, nbd_reload_tls, users_set_rules); any other change is listed
 * as needing a restart and not copied, so the next reload names it again
 * until the node restarts. Sections come and go here (cluster_add_node).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/cluster/cluster.h"
#include "node/config_keys.h"
#include "node/log.h"
#include "node/nbd/nbd.h"
#include "node/reload.h"
#include "node/remote/remote.h"
#include "node/client/users.h"
#include "tmem/tmem.h"

struct reload {
	char path[CONFIG_PATH_MAX + 1];
	char name[CONFIG_NAME_MAX];
	struct config *cur;
	bool level_from_flag;
	struct remote *remote;
	struct nbd *nbd;     /* reload_set_nbd: its TLS keys are read again */
	struct users *users; /* reload_set_users: rules and client limits apply */
	struct tmem *tmem;
	uint64_t reloads; /* reloads that loaded the file */
	uint64_t failed;  /* reloads refused: the file did not load */
	uint64_t refused; /* `ramsterctl reload` from an unprivileged client */
	uint64_t pending; /* reloads that left changed keys waiting for a restart */
	uint64_t nodes_added;
	uint64_t nodes_removed;
};

struct reload *reload_create(const char *path, const char *name, struct config *cur,
			     bool level_from_flag, struct remote *remote)
{
	struct reload *rl = calloc(1, sizeof(*rl));

	if (!rl)
		return NULL;
	snprintf(rl->path, sizeof(rl->path), "%s", path);
	snprintf(rl->name, sizeof(rl->name), "%s", name);
	rl->cur = cur;
	rl->level_from_flag = level_from_flag;
	rl->remote = remote;
	return rl;
}

void reload_set_users(struct reload *rl, struct users *users, struct tmem *t)
{
	if (!rl)
		return;
	rl->users = users;
	rl->tmem = t;
}

void reload_set_nbd(struct reload *rl, struct nbd *nbd)
{
	if (rl)
		rl->nbd = nbd;
}

void reload_destroy(struct reload *rl)
{
	free(rl);
}

/* Append ", " (when not first) and the formatted text to buf. */
static void __attribute__((format(printf, 3, 4)))
reload_note(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n && n + 2 < len) {
		memcpy(buf + n, ", ", 3);
		n += 2;
	}
	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* @return whether key k differs between two sections (or configurations) of its base. */
static bool reload_differs(const struct config_key *k, const void *a, const void *b)
{
	uint16_t pa, pb;

	if (k->type == CONFIG_HOSTPORT) { /* the port; the host below */
		memcpy(&pa, (const char *)a + k->off2, sizeof(pa));
		memcpy(&pb, (const char *)b + k->off2, sizeof(pb));
		if (pa != pb)
			return true;
	}
	switch (k->type) {
	case CONFIG_HOSTPORT:
	case CONFIG_TEXT:
	case CONFIG_PATH:
	case CONFIG_ADDRESS:
		return strcmp(config_key_cfield(k, a), config_key_cfield(k, b)) != 0;
	default:
		return config_key_get(k, a) != config_key_get(k, b);
	}
}

/*
 * Compare key k of what runs (cur) and of the new file (nw), both its
 * section's base. A change is noted in res->applied and copied into cur when
 * apply, else noted in res->restart and left as it runs. @return true if a
 * change was applied.
 */
static bool reload_key(const struct config_key *k, void *cur, const void *nw, bool apply,
		       struct reload_result *res)
{
	char *list = apply ? res->applied : res->restart;
	bool changed = false;

	switch (k->type) {
	case CONFIG_TEXT:
	case CONFIG_PATH:
	case CONFIG_ADDRESS:
	case CONFIG_HOSTPORT: {
		char *a = config_key_field(k, cur);
		const char *b = config_key_cfield(k, nw);
		uint16_t pa, pb;

		if (strcmp(a, b)) {
			reload_note(list, RELOAD_TEXT_MAX, "%s '%s' -> '%s'", k->name, a, b);
			if (apply)
				memcpy(a, b, k->size);
			changed = true;
		}
		if (k->type != CONFIG_HOSTPORT)
			break;
		memcpy(&pa, (char *)cur + k->off2, sizeof(pa));
		memcpy(&pb, (const char *)nw + k->off2, sizeof(pb));
		if (pa != pb) {
			reload_note(list, RELOAD_TEXT_MAX, "%s's port %u -> %u", k->name,
				    (unsigned)pa, (unsigned)pb);
			if (apply)
				memcpy((char *)cur + k->off2, &pb, sizeof(pb));
			changed = true;
		}
		break;
	}
	default:
		if (config_key_get(k, cur) != config_key_get(k, nw)) {
			reload_note(list, RELOAD_TEXT_MAX, "%s %llu -> %llu", k->name,
				    (unsigned long long)config_key_get(k, cur),
				    (unsigned long long)config_key_get(k, nw));
			if (apply)
				memcpy(config_key_field(k, cur), config_key_cfield(k, nw), k->size);
			changed = true;
		}
		break;
	}
	return changed && apply;
}

/*
 * NBD TLS keys: with TLS on and nbd_tls unchanged, the key files are read
 * again on every reload (rotated certificates, a new PSK file), from the new
 * paths if they changed; otherwise a path change needs a restart.
 */
static void reload_nbd_tls(struct reload *rl, struct config_node *cur, const struct config_node *nw,
			   struct reload_result *res)
{
	char err[CONFIG_ERR_MAX];
	int rc = cur->nbd_tls == nw->nbd_tls ? nbd_reload_tls(rl->nbd, nw, err, sizeof(err)) : 1;
	size_t i;

	if (rc == 0) {
		reload_note(res->applied, RELOAD_TEXT_MAX, "NBD TLS keys read again (%s)",
			    nw->nbd_tls_psk[0] ? nw->nbd_tls_psk : nw->nbd_tls_certificates);
		memcpy(cur->nbd_tls_psk, nw->nbd_tls_psk, sizeof(cur->nbd_tls_psk));
		memcpy(cur->nbd_tls_certificates, nw->nbd_tls_certificates,
		       sizeof(cur->nbd_tls_certificates));
		return;
	}
	if (rc < 0) {
		log_warn("reload: NBD TLS keys not read again, the running ones stay: %s", err);
		reload_note(res->restart, RELOAD_TEXT_MAX, "NBD TLS keys (%s)", err);
		return;
	}
	for (i = 0; i < config_keys_n; i++)
		if (config_keys[i].reload == CONFIG_RELOAD_TLS_KEYS)
			reload_key(&config_keys[i], cur, nw, false, res);
}

/* The log level: the file's when set, unless --log-level was given. */
static void reload_log_level(struct reload *rl, struct config_node *cur,
			     const struct config_node *nw, struct reload_result *res)
{
	if (nw->log_level >= 0 && (enum log_level)nw->log_level != log_get_level()) {
		if (rl->level_from_flag) {
			reload_note(res->restart, RELOAD_TEXT_MAX,
				    "log_level %s (--log-level %s on the command line wins)",
				    log_level_name((enum log_level)nw->log_level),
				    log_level_name(log_get_level()));
		} else {
			reload_note(res->applied, RELOAD_TEXT_MAX, "log_level %s -> %s",
				    log_level_name(log_get_level()),
				    log_level_name((enum log_level)nw->log_level));
			log_set_level((enum log_level)nw->log_level);
		}
	}
	cur->log_level = nw->log_level;
}

/*
 * The keys of [cluster] (cur, nw: the configurations) or of this node's
 * section (the node's), by their rows' reload rules, in the rows' order.
 * @return true if a key the remote side reads was applied.
 */
static bool reload_section(struct reload *rl, enum config_sec sec, void *cur, const void *nw,
			   struct reload_result *res)
{
	bool changed = false, tls_done = false;
	size_t i;

	for (i = 0; i < config_keys_n; i++) {
		const struct config_key *k = &config_keys[i];

		if (k->sec != sec)
			continue;
		switch (k->reload) {
		case CONFIG_RELOAD_USERS: /* reload_users */
			break;
		case CONFIG_RELOAD_RESTART:
			reload_key(k, cur, nw, false, res);
			break;
		case CONFIG_RELOAD_APPLY:
			changed |= reload_key(k, cur, nw, true, res);
			break;
		case CONFIG_RELOAD_TLS_KEYS: /* [node] only: its two rows, read at once */
			if (!tls_done)
				reload_nbd_tls(rl, cur, nw, res);
			tls_done = true;
			break;
		case CONFIG_RELOAD_LOG_LEVEL: /* [node] only */
			reload_log_level(rl, cur, nw, res);
			break;
		}
	}
	return changed;
}

/* The other nodes: added ones join; changed or removed ones need a restart. */
static void reload_nodes(struct reload *rl, struct config *cur, const struct config *nw,
			 struct reload_result *res)
{
	size_t i;

	for (i = 0; i < cur->n_nodes; i++) {
		const struct config_node *o = &cur->nodes[i];
		const struct config_node *n = config_find_node(nw, o->name);
		int rc;

		if (!strcmp(o->name, rl->name))
			continue;
		if (!n) {
			rc = rl->remote ? cluster_remove_node(remote_cluster(rl->remote), o->id)
					: -ENOTCONN;
			if (rc == -EBUSY) {
				reload_note(res->restart, RELOAD_TEXT_MAX,
					    "[node %s] removed but still holds pages of this node "
					    "(drain it first: ramsterctl drain %s)",
					    o->name, o->name);
				continue;
			}
			if (rc) {
				reload_note(res->restart, RELOAD_TEXT_MAX, "[node %s] removed (%s)",
					    o->name, strerror(-rc));
				continue;
			}
			rl->nodes_removed++;
			reload_note(res->applied, RELOAD_TEXT_MAX, "[node %s] removed", o->name);
			/* nothing keeps pointers into cur->nodes past start-up: close the gap */
			memmove(&cur->nodes[i], &cur->nodes[i + 1],
				(cur->n_nodes - i - 1) * sizeof(cur->nodes[0]));
			cur->n_nodes--;
			i--;
			continue;
		}
		if (n->id != o->id || strcmp(n->host, o->host) || n->port != o->port ||
		    n->transport != o->transport)
			reload_note(res->restart, RELOAD_TEXT_MAX, "[node %s] id/address/transport",
				    o->name);
	}
	for (i = 0; i < nw->n_nodes; i++) {
		const struct config_node *n = &nw->nodes[i];
		size_t k;
		int rc = -ENOTCONN;

		if (config_find_node(cur, n->name))
			continue;
		for (k = 0; k < cur->n_nodes; k++)
			if (cur->nodes[k].id == n->id)
				break;
		if (k < cur->n_nodes) {
			reload_note(res->restart, RELOAD_TEXT_MAX,
				    "[node %s] added with id %u, which [node %s] had", n->name,
				    n->id, cur->nodes[k].name);
			continue;
		}
		if (rl->remote && cur->n_nodes < CONFIG_NODES_MAX)
			rc = cluster_add_node(remote_cluster(rl->remote), n);
		if (rc) {
			reload_note(res->restart, RELOAD_TEXT_MAX, "[node %s] added (%s)", n->name,
				    rc == -ENOTCONN ? "this node is not in a collective"
						    : strerror(-rc));
			continue;
		}
		cur->nodes[cur->n_nodes++] = *n;
		rl->nodes_added++;
		reload_note(res->applied, RELOAD_TEXT_MAX, "[node %s] added (id %u, %s:%u)",
			    n->name, n->id, n->host, (unsigned)n->port);
	}
}

static void reload_weight(void *arg, const struct users_user *uu)
{
	struct reload *rl = arg;

	if (rl->tmem && uu->tier_owner < TMEM_OWNERS_MAX)
		(void)tmem_owner_set_weight(rl->tmem, uu->tier_owner, uu->weight);
}

/*
 * [limits] and the per-uid rules: the client keys and the rules apply (the
 * records take their rule again), the NBD and peer keys need a restart.
 */
static void reload_users(struct reload *rl, struct config *cur, const struct config *nw,
			 struct reload_result *res)
{
	bool clients = false, others = false;
	bool rules = cur->n_users != nw->n_users ||
		     memcmp(cur->users, nw->users, cur->n_users * sizeof(cur->users[0]));
	size_t i;

	for (i = 0; i < config_keys_n; i++) {
		const struct config_key *k = &config_keys[i];

		if (k->sec != CONFIG_SEC_LIMITS || !reload_differs(k, cur, nw))
			continue;
		if (k->reload == CONFIG_RELOAD_USERS)
			clients = true;
		else
			others = true;
	}

	if (others)
		reload_note(res->restart, RELOAD_TEXT_MAX, "[limits] nbd_*/peer_* keys");
	if (!clients && !rules)
		return;
	if (!rl->users) {
		reload_note(res->restart, RELOAD_TEXT_MAX, "%s",
			    rules ? "[uid]/[user]/[group] rules" : "[limits] client keys");
		return;
	}
	users_set_rules(rl->users, nw, reload_weight, rl);
	for (i = 0; i < config_keys_n; i++)
		if (config_keys[i].sec == CONFIG_SEC_LIMITS &&
		    config_keys[i].reload == CONFIG_RELOAD_USERS)
			memcpy(config_key_field(&config_keys[i], cur),
			       config_key_cfield(&config_keys[i], nw), config_keys[i].size);
	cur->n_users = nw->n_users;
	memcpy(cur->users, nw->users, nw->n_users * sizeof(nw->users[0]));
	if (clients)
		reload_note(res->applied, RELOAD_TEXT_MAX, "[limits] client keys");
	if (rules)
		reload_note(res->applied, RELOAD_TEXT_MAX, "[uid]/[user]/[group] rules (%zu)",
			    nw->n_users);
}

/* [export NAME]: any change needs a restart (a pool and its pages per export). */
static void reload_exports(const struct config *cur, const struct config *nw,
			   struct reload_result *res)
{
	size_t i, k;
	bool same = cur->n_exports == nw->n_exports;

	for (i = 0; same && i < cur->n_exports; i++) {
		same = !strcmp(cur->exports[i].name, nw->exports[i].name);
		for (k = 0; same && k < config_keys_n; k++)
			same = config_keys[k].sec != CONFIG_SEC_EXPORT ||
			       !reload_differs(&config_keys[k], &cur->exports[i], &nw->exports[i]);
	}
	if (!same)
		reload_note(res->restart, RELOAD_TEXT_MAX, "[export] sections");
}

int reload_run(struct reload *rl, struct reload_result *res)
{
	struct config *nw;
	const struct config_node *nself;
	struct config_node *cself;
	bool tun;

	memset(res, 0, sizeof(*res));
	if (!rl) {
		snprintf(res->error, sizeof(res->error),
			 "the node runs without a cluster file (--config): nothing to reload");
		return -ENOENT;
	}
	nw = malloc(sizeof(*nw));
	if (!nw) {
		rl->failed++;
		snprintf(res->error, sizeof(res->error), "out of memory");
		return -ENOMEM;
	}
	if (config_load(nw, rl->path, res->error, sizeof(res->error))) {
		rl->failed++;
		log_error("reload: %s; nothing changed", res->error);
		free(nw);
		return -EINVAL;
	}
	nself = config_find_node(nw, rl->name);
	cself = (struct config_node *)config_find_node(rl->cur, rl->name);
	if (!nself || !cself) {
		rl->failed++;
		snprintf(res->error, sizeof(res->error), "%s: no [node %s] section any more",
			 rl->path, rl->name);
		log_error("reload: %s; nothing changed", res->error);
		free(nw);
		return -EINVAL;
	}
	rl->reloads++;
	tun = reload_section(rl, CONFIG_SEC_CLUSTER, rl->cur, nw, res);
	tun |= reload_section(rl, CONFIG_SEC_NODE, cself, nself, res);
	if (tun && rl->remote)
		remote_set_tunables(rl->remote, rl->cur, cself);
	reload_nodes(rl, rl->cur, nw, res);
	reload_exports(rl->cur, nw, res);
	reload_users(rl, rl->cur, nw, res);
	free(nw);
	if (res->restart[0])
		rl->pending++;
	log_notice("reload of %s: %s%s%s", rl->path,
		   res->applied[0] ? "applied: " : "nothing to apply", res->applied,
		   res->restart[0] ? "" : "; nothing needs a restart");
	if (res->restart[0])
		log_warn("reload: changed but needs a restart (left as it runs): %s", res->restart);
	return 0;
}

int reload_request(struct reload *rl, uid_t uid, struct reload_result *res)
{
	if (uid != 0 && uid != geteuid()) {
		memset(res, 0, sizeof(*res));
		snprintf(res->error, sizeof(res->error),
			 "reload is for root or the daemon's user (uid %ld), not uid %ld",
			 (long)geteuid(), (long)uid);
		if (rl)
			rl->refused++;
		log_notice("reload refused: a client of uid %ld", (long)uid);
		return -EPERM;
	}
	return reload_run(rl, res);
}

void reload_foreach_stat(const struct reload *rl,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg)
{
	fn(arg, "reload_done", rl->reloads,
	   "reloads of the cluster file (SIGHUP, ramsterctl reload)");
	fn(arg, "reload_failed", rl->failed,
	   "reloads refused: the file did not load (nothing changed)");
	fn(arg, "reload_refused", rl->refused, "ramsterctl reload refused: not root or our uid");
	fn(arg, "reload_restart_needed", rl->pending,
	   "reloads that left changed keys for a restart");
	fn(arg, "reload_nodes_added", rl->nodes_added, "nodes added to the collective by reloads");
	fn(arg, "reload_nodes_removed", rl->nodes_removed,
	   "nodes removed from the collective by reloads (drained first)");
}
