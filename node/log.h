/*
 * log.h - the node's log: leveled lines on stderr.
 *
 * One line a call, written with a single write(2) so lines from different
 * threads never interleave. Warnings and errors carry the file:line that
 * logged them. When stderr is the journal ($JOURNAL_STREAM names it), each
 * line is a native journal entry instead (sd_journal_send: PRIORITY,
 * CODE_FILE, CODE_LINE, RAMSTER_NODE), or, if that cannot be sent, a stderr
 * line with a "<N>" priority prefix. Hot paths count; they do not log.
 */
#ifndef RAMSTER_NODE_LOG_H
#define RAMSTER_NODE_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_NOTICE, LOG_WARN, LOG_ERROR };

/* Lines below level are dropped. Default LOG_INFO. Any thread (a reload changes it). */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* The node's name, for the RAMSTER_NODE field of journal entries. */
void log_set_node(const char *name);

/* @return the level named s ("debug", "info", "notice", "warn", "error"), or -EINVAL. */
int log_level_parse(const char *s);

/* @return the name of level (a static string). */
const char *log_level_name(enum log_level level);

/* Write one line at level. file/line are printed for LOG_WARN and above. */
void log_msg(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_debug(...)	log_msg(LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...)	log_msg(LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_error(...)	log_msg(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)

#endif /* RAMSTER_NODE_LOG_H */
