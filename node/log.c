/*
 * log.c - leveled log lines on stderr, or native journal entries (log.h).
 *
 * Each line is formatted into a stack buffer and written with one write(2),
 * so concurrent writers never interleave inside a line; a line longer than
 * the buffer is cut and ends in "...". Logging never fails its caller.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-journal.h>
/* sd-journal.h brings <syslog.h>, whose LOG_DEBUG/INFO/NOTICE macros would
 * shadow log.h's levels; the priorities sent are log_prio[] below */
#undef LOG_DEBUG
#undef LOG_INFO
#undef LOG_NOTICE

#include "node/log.h"

#define LOG_LINE_MAX 1024
#define LOG_JOURNAL_SOCKET "/run/systemd/journal/socket" /* sd-journal's, fixed */

/* Atomic: every thread logs (the remotify thread too), and the level may be
 * set while they do. */
static atomic_int log_level = LOG_INFO; /* an enum log_level */

/* clang-format off */
static const char *const log_names[] = {
	[LOG_DEBUG] = "debug",
	[LOG_INFO] = "info",
	[LOG_NOTICE] = "notice",
	[LOG_WARN] = "warn",
	[LOG_ERROR] = "error",
};

/* syslog priorities, for the journal's "<N>" prefix */
static const int log_prio[] = {
	[LOG_DEBUG] = 7,
	[LOG_INFO] = 6,
	[LOG_NOTICE] = 5,
	[LOG_WARN] = 4,
	[LOG_ERROR] = 3,
};
/* clang-format on */

/* Relaxed atomics: a reload (SIGHUP) changes the level while other threads log. */
void log_set_level(enum log_level level)
{
	atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

int log_level_parse(const char *s)
{
	int i;

	for (i = LOG_DEBUG; i <= LOG_ERROR; i++)
		if (!strcmp(s, log_names[i]))
			return i;
	if (!strcmp(s, "warning"))
		return LOG_WARN;
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	if ((int)level < LOG_DEBUG || level > LOG_ERROR)
		return "?";
	return log_names[level];
}

static char log_node[64]; /* RAMSTER_NODE= of journal entries */

void log_set_node(const char *name)
{
	snprintf(log_node, sizeof(log_node), "%s", name ? name : "");
}

/* Where lines go. */
enum log_sink {
	LOG_SINK_PLAIN,	  /* stderr, timestamped */
	LOG_SINK_STREAM,  /* stderr is the journal's stream: "<N>" prefixes */
	LOG_SINK_NATIVE,  /* native journal entries (sd_journal_send) */
};

/*
 * Is stderr the journal? systemd sets $JOURNAL_STREAM to the device and inode
 * of the stream it connected to stderr; a stderr redirected elsewhere (a
 * shell's 2>file inside a unit) keeps the variable but not the stream, so the
 * two are compared (systemd.exec(5)). Native entries need journald's socket:
 * sd_journal_send drops an entry silently when it is missing (ENOENT), so
 * without it the stream keeps the lines. Decided once, at the first line.
 */
static enum log_sink log_sink(void)
{
	static _Atomic int sink = -1; /* decided by the first caller, any thread */
	unsigned long long dev, ino;
	const char *env;
	struct stat st;

	if (sink >= 0)
		return (enum log_sink)sink;
	env = getenv("JOURNAL_STREAM");
	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) ||
	    (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
		sink = LOG_SINK_PLAIN;
	else if (stat(LOG_JOURNAL_SOCKET, &st) || !S_ISSOCK(st.st_mode))
		sink = LOG_SINK_STREAM;
	else
		sink = LOG_SINK_NATIVE;
	return (enum log_sink)sink;
}

/*
 * A native journal entry: the message with its priority, the source
 * file:line (CODE_FILE, CODE_LINE) and the node (RAMSTER_NODE), so
 * `journalctl RAMSTER_NODE=alpha -p warning` selects. @return 0 or -errno.
 */
static int log_journal_send(enum log_level level, const char *file, int line, const char *msg)
{
	return sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", log_prio[level],
			       "SYSLOG_IDENTIFIER=%s", program_invocation_short_name,
			       "CODE_FILE=%s", file, "CODE_LINE=%d", line, "RAMSTER_NODE=%s",
			       log_node[0] ? log_node : "-", "RAMSTER_LEVEL=%s", log_names[level],
			       NULL);
}

void log_msg(enum log_level level, const char *file, int line, const char *fmt, ...)
{
	char buf[LOG_LINE_MAX];
	size_t n = 0, body, room = sizeof(buf) - 1; /* keep one byte for the newline */
	enum log_sink sink = log_sink();
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int r;

	if (level < log_get_level())
		return;
	if (sink != LOG_SINK_PLAIN) {
		/* the journal timestamps stream lines itself and reads a "<N>" prefix
		 * as the priority (for a native entry: used only if it cannot be sent) */
		r = snprintf(buf, room, "<%d>", log_prio[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		n = strftime(buf, room, "%Y-%m-%d %H:%M:%S", &tm);
		r = snprintf(buf + n, room - n, ".%03ld %s ", ts.tv_nsec / 1000000,
			     log_names[level]);
	}
	n += r > 0 ? (size_t)r : 0;
	body = n;
	if (level >= LOG_WARN && n < room) {
		r = snprintf(buf + n, room - n, "%s:%d: ", file, line);
		n += r > 0 ? (size_t)r : 0;
	}
	if (n < room) {
		va_start(ap, fmt);
		r = vsnprintf(buf + n, room - n, fmt, ap);
		va_end(ap);
		n += r > 0 ? (size_t)r : 0;
	}
	if (n >= room) {
		n = room - 1;
		memcpy(buf + n - 3, "...", 3);
	}
	buf[n] = '\0';
	if (sink == LOG_SINK_NATIVE && log_journal_send(level, file, line, buf + body) >= 0)
		return;
	buf[n++] = '\n';
	while (n) {
		ssize_t w = write(STDERR_FILENO, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		break; /* nowhere to report a failing log */
	}
}
