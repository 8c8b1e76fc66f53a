/*
 * users.c - client credentials and the per-uid records (users.h).
 *
 * A uid's record is made at its first connection and kept for the daemon's
 * life (its counters stay visible in `ramsterctl clients`): only root can
 * make uids, so their number is the machine's, not a client's choice.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node/log.h"
#include "node/client/users.h"

#define USERS_BUCKETS 256

struct users {
	struct config_limits limits;
	size_t n_rules;
	struct config_user rules[CONFIG_USERS_MAX];
	uid_t daemon_uid;
	struct users_user *buckets[USERS_BUCKETS];
	uint32_t connections;   /* all uids */
	uint32_t next_owner;    /* tier owner ids handed out */
	uint64_t refused_total;
};

struct users *users_create(const struct config *cfg, uid_t daemon_uid)
{
	struct users *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->limits = cfg->limits;
	u->n_rules = cfg->n_users;
	memcpy(u->rules, cfg->users, cfg->n_users * sizeof(cfg->users[0]));
	u->daemon_uid = daemon_uid;
	return u;
}

void users_destroy(struct users *u)
{
	struct users_user *uu, *next;
	unsigned i;

	if (!u)
		return;
	for (i = 0; i < USERS_BUCKETS; i++)
		for (uu = u->buckets[i]; uu; uu = next) {
			next = uu->next;
			free(uu);
		}
	free(u);
}

int users_cred_read(const struct users *u, int fd, struct users_cred *cred)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	gid_t groups[USERS_GROUPS_MAX];
	int n;

	memset(cred, 0, sizeof(*cred));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) || len != sizeof(uc))
		return -errno ? -errno : -EINVAL;
	cred->uid = uc.uid;
	cred->gid = uc.gid;
	cred->pid = uc.pid;
	cred->privileged = uc.uid == 0 || uc.uid == u->daemon_uid;
#ifdef SO_PEERGROUPS
	len = sizeof(groups);
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len)) {
		n = (int)(len / sizeof(gid_t));
		memcpy(cred->groups, groups, (size_t)n * sizeof(gid_t));
		cred->n_groups = (unsigned)n;
	} else if (errno == ERANGE) {
		/* more groups than kept: only the first USERS_GROUPS_MAX count */
		log_debug("client pid %ld: more than %d groups; the rest are not consulted",
			  (long)uc.pid, USERS_GROUPS_MAX);
	}
#else
	(void)groups;
	(void)n;
#endif
	return 0;
}

bool users_cred_in_group(const struct users_cred *cred, gid_t g)
{
	unsigned i;

	if (cred->gid == g)
		return true;
	for (i = 0; i < cred->n_groups; i++)
		if (cred->groups[i] == g)
			return true;
	return false;
}

/* The rule for cred: its uid's, else the first group rule it is in, else NULL. */
static const struct config_user *users_rule(const struct users *u, const struct users_cred *cred)
{
	size_t i;

	for (i = 0; i < u->n_rules; i++)
		if (!u->rules[i].group && u->rules[i].id == cred->uid)
			return &u->rules[i];
	for (i = 0; i < u->n_rules; i++)
		if (u->rules[i].group && users_cred_in_group(cred, u->rules[i].id))
			return &u->rules[i];
	return NULL;
}

/* uu's limits from the defaults and the rule that matches it (its first connection's groups). */
static void users_apply_rule(const struct users *u, struct users_user *uu)
{
	struct users_cred cred = {.uid = uu->uid, .gid = uu->gid, .n_groups = uu->n_groups};
	const struct config_user *rule;

	memcpy(cred.groups, uu->groups, uu->n_groups * sizeof(uu->groups[0]));
	uu->rule_line = 0;
	uu->max_pages = 0;
	uu->weight = u->limits.default_weight;
	uu->max_connections = u->limits.max_clients_per_uid;
	uu->max_pools = u->limits.max_pools_per_uid;
	rule = users_rule(u, &cred);
	if (!rule)
		return;
	uu->rule_line = rule->line;
	uu->max_pages = rule->max_mb * (1024 * 1024 / 4096);
	if (rule->weight)
		uu->weight = rule->weight;
	if (rule->max_connections)
		uu->max_connections = rule->max_connections;
	if (rule->max_pools)
		uu->max_pools = rule->max_pools;
}

static struct users_user *users_find(struct users *u, const struct users_cred *cred)
{
	unsigned h = (unsigned)cred->uid % USERS_BUCKETS;
	struct users_user *uu;

	for (uu = u->buckets[h]; uu; uu = uu->next)
		if (uu->uid == cred->uid)
			return uu;
	uu = calloc(1, sizeof(*uu));
	if (!uu)
		return NULL;
	uu->uid = cred->uid;
	uu->privileged = cred->privileged;
	uu->gid = cred->gid;
	uu->n_groups = cred->n_groups;
	memcpy(uu->groups, cred->groups, cred->n_groups * sizeof(cred->groups[0]));
	users_apply_rule(u, uu);
	uu->tier_owner = ++u->next_owner;
	uu->next = u->buckets[h];
	u->buckets[h] = uu;
	return uu;
}

struct users_user *users_adopt(struct users *u, uid_t uid, gid_t gid)
{
	struct users_cred cred = {.uid = uid, .gid = gid};

	cred.privileged = uid == 0 || uid == u->daemon_uid;
	return users_find(u, &cred);
}

int users_connect(struct users *u, const struct users_cred *cred, struct users_user **out)
{
	struct users_user *uu = users_find(u, cred);

	if (!uu)
		return -ENOMEM;
	if (cred->privileged) {
		/* root and the daemon's uid are always let in: the operator can look */
	} else if (u->connections >= u->limits.max_clients) {
		uu->refused_conn++;
		u->refused_total++;
		return -EUSERS;
	} else if (uu->connections >= uu->max_connections) {
		uu->refused_conn++;
		u->refused_total++;
		return -EMFILE;
	}
	uu->connections++;
	if (!cred->privileged)
		u->connections++; /* the operator's own do not use up max_clients */
	*out = uu;
	return 0;
}

void users_disconnect(struct users *u, struct users_user *uu)
{
	if (!uu)
		return;
	uu->connections--;
	if (!uu->privileged)
		u->connections--;
}

int users_pool_take(struct users *u, struct users_user *uu)
{
	(void)u;
	if (uu->pools >= uu->max_pools) {
		uu->refused_pools++;
		return -EDQUOT;
	}
	uu->pools++;
	return 0;
}

void users_pool_drop(struct users *u, struct users_user *uu)
{
	(void)u;
	uu->pools--;
}

void users_foreach(const struct users *u, void (*fn)(void *arg, const struct users_user *uu),
		   void *arg)
{
	const struct users_user *uu;
	unsigned i;

	for (i = 0; i < USERS_BUCKETS; i++)
		for (uu = u->buckets[i]; uu; uu = uu->next)
			fn(arg, uu);
}

void users_set_rules(struct users *u, const struct config *cfg,
		     void (*changed)(void *arg, const struct users_user *uu), void *arg)
{
	struct users_user *uu;
	uint32_t weight;
	unsigned i;

	u->limits.max_clients = cfg->limits.max_clients;
	u->limits.max_clients_per_uid = cfg->limits.max_clients_per_uid;
	u->limits.max_pools_per_uid = cfg->limits.max_pools_per_uid;
	u->limits.default_weight = cfg->limits.default_weight;
	u->n_rules = cfg->n_users;
	memcpy(u->rules, cfg->users, cfg->n_users * sizeof(cfg->users[0]));
	for (i = 0; i < USERS_BUCKETS; i++)
		for (uu = u->buckets[i]; uu; uu = uu->next) {
			weight = uu->weight;
			users_apply_rule(u, uu);
			if (uu->weight != weight && changed)
				changed(arg, uu);
		}
}

const struct config_limits *users_limits(const struct users *u)
{
	return &u->limits;
}

uint64_t users_refused_total(const struct users *u)
{
	return u->refused_total;
}
