/*
 * pagegen.c - deterministic test and benchmark pages: one seed, one page, the
 * same on every run.
 *
 * One home for the generators the integration tests, ramster-bench and
 * ramster-netbench used to carry a copy each of. Every page is a pure
 * function of its seed: splitmix64 turns the seed into the state of an
 * xorshift64* stream, and the page is drawn from that stream. The bytes for a
 * seed are a contract (tests compare data, benchmarks compare figures across
 * runs): change none of the arithmetic, tables or formats below.
 */
#include "tools/pagegen.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define PAGE PAGEGEN_PAGE_SIZE

/* Text is built in a scratch buffer with room to overrun, then copied. */
#define TEXT_SLACK 256

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

uint64_t pagegen_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t pagegen_rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

unsigned pagegen_below(uint64_t r, unsigned n)
{
	return (unsigned)(((r & 0xffffffffull) * n) >> 32);
}

void pagegen_zero(void *page)
{
	memset(page, 0, PAGE);
}

void pagegen_random(void *page, uint64_t seed)
{
	unsigned char *p = page;
	uint64_t s = pagegen_mix(seed) | 1, w;
	size_t i;

	for (i = 0; i < PAGE; i += 8) {
		w = pagegen_rng_next(&s);
		memcpy(p + i, &w, 8);
	}
}

/* ---- text ---------------------------------------------------------------- */

/* clang-format off */
static const char *const words[] = {
	"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
	"by", "on", "not", "this", "are", "or", "from", "at", "which", "but", "have", "an", "had",
	"they", "were", "their", "one", "all", "we", "can", "has", "there", "been", "if", "more",
	"when", "will", "would", "who", "so", "no", "memory", "page", "pool", "node", "client",
	"server", "request", "error", "value", "object", "index", "frame", "cache", "kernel",
	"swap", "data", "time", "system", "process", "thread", "buffer", "queue", "network",
	"remote", "local", "handle", "compressed", "transcendent", "ephemeral", "persistent",
	"cluster", "heartbeat", "replica", "peer", "socket", "reply", "timeout", "budget",
	"evicted", "stored", "refused", "flushed", "version", "header", "payload", "message",
	"number", "between", "through", "because", "another", "without", "machine", "working",
	"while", "under", "about", "should", "could", "after", "before", "first", "other",
	"where", "every", "might",
};

static const char *const levels[] = { "INFO", "DEBUG", "WARN", "NOTICE", "ERROR" };
static const char level_lens[] = { 4, 5, 4, 6, 5 };

/* Log messages; '#' is replaced by a number. */
static const char *const logs[] = {
	"stored # pages in pool # of client #",
	"flushed object # (# pages) in # us",
	"evicted # ephemeral frames, budget # frames",
	"peer node-# heartbeat ok, rtt # us",
	"request # from client # took # us",
	"remotify moved # frames to node-#",
	"repatriated page # of object # from node-#",
	"refused put: page # compressed to # bytes",
	"connection # closed by peer after # requests",
	"new pool # for client # (persistent)",
	"timeout waiting for node-# after # ms, retrying",
	"checkpoint: # objects, # pages, # bytes of metadata",
};
/* clang-format on */

static void put_str(char **p, const char *s, size_t len)
{
	memcpy(*p, s, len);
	*p += len;
}

/* v in decimal, zero-padded to at least width digits. */
static void put_num(char **p, uint64_t v, int width)
{
	char tmp[24], *q = *p;
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n < width)
		tmp[n++] = '0';
	while (n)
		*q++ = tmp[--n];
	*p = q;
}

/* v (below 100) as two digits, then sep. */
static void put_two(char **p, unsigned v, char sep)
{
	char *q = *p;

	q[0] = (char)('0' + v / 10);
	q[1] = (char)('0' + v % 10);
	q[2] = sep;
	*p = q + 3;
}

/* A skewed word choice (small indices more often), as in real text. */
static unsigned word_pick(uint64_t r)
{
	const unsigned n = ARRAY_SIZE(words);
	unsigned a = pagegen_below(r, n), c = pagegen_below(r >> 32, n);

	return a < c ? a : c;
}

/*
 * n words, each followed by a space; a sentence starts with a capital and has
 * a comma after about one word in 32 (never after its last).
 */
static void put_words(char **p, uint64_t *s, unsigned n, bool sentence)
{
	unsigned i, w;

	for (i = 0; i < n; i++) {
		uint64_t r = pagegen_rng_next(s);
		char *start = *p;

		w = word_pick(r);
		put_str(p, words[w], strlen(words[w]));
		if (sentence && i == 0)
			*start = (char)(*start - 'a' + 'A');
		if (sentence && (r >> 59) == 0 && i + 1 < n)
			*(*p)++ = ',';
		*(*p)++ = ' ';
	}
}

/* msg with each '#' replaced by a number drawn from r, then a newline. */
static void put_log(char **p, const char *msg, uint64_t r)
{
	const char *hash;
	size_t len;

	for (;;) {
		hash = strchr(msg, '#');
		len = hash ? (size_t)(hash - msg) : strlen(msg);
		put_str(p, msg, len);
		if (!hash)
			break;
		put_num(p, (r & 0xff) < 0xc0 ? r & 0x3ff : r & 0xfffff, 1);
		r >>= 20;
		msg = hash + 1;
	}
	*(*p)++ = '\n';
}

void pagegen_text(void *page, uint64_t seed)
{
	char buf[PAGE + TEXT_SLACK], *p = buf, date[16];
	uint64_t s = pagegen_mix(seed) | 1, r = pagegen_rng_next(&s);
	unsigned day = 1 + pagegen_below(r, 28), hh = pagegen_below(r >> 8, 24);
	unsigned mm = pagegen_below(r >> 16, 60), ss = pagegen_below(r >> 24, 60), lvl;

	/* the date stays for the page; the time of day runs on */
	snprintf(date, sizeof(date), "20%02u-%02u-%02u ", 20 + (unsigned)(seed >> 5) % 8,
		 1 + (unsigned)(seed >> 8) % 12, day);
	while (p < buf + PAGE) {
		r = pagegen_rng_next(&s);
		if ((r & 7) == 0) {
			/* a sentence of prose */
			put_words(&p, &s, 6 + pagegen_below(r >> 8, 12), true);
			p[-1] = '.';
			*p++ = '\n';
			continue;
		}
		/* a log line */
		ss += pagegen_below(r >> 2, 4);
		if (ss >= 60) {
			ss -= 60;
			if (++mm == 60) {
				mm = 0;
				hh = (hh + 1) % 24;
			}
		}
		put_str(&p, date, 11);
		put_two(&p, hh, ':');
		put_two(&p, mm, ':');
		put_two(&p, ss, ' ');
		lvl = pagegen_below(r >> 8, 16);
		lvl = lvl < 10 ? 0 : lvl < 13 ? 1 : lvl - 12;
		put_str(&p, levels[lvl], (size_t)level_lens[lvl]);
		put_str(&p, " worker-", 8);
		put_num(&p, pagegen_below(r >> 12, 8), 1);
		put_str(&p, ": ", 2);
		put_log(&p, logs[pagegen_below(r >> 20, ARRAY_SIZE(logs))], pagegen_rng_next(&s));
	}
	memcpy(page, buf, PAGE);
}

/* ---- plain text ---------------------------------------------------------- */

/* clang-format off */
/* A shorter list than words[], in another order: its indices are its own. */
static const char *const plain_words[] = {
	"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
	"be", "by", "on", "not", "this", "are", "or", "from", "at", "which", "but", "memory",
	"page", "pool", "node", "client", "server", "request", "error", "value", "object",
	"index", "frame", "cache", "kernel", "data", "time", "process", "thread", "buffer",
	"queue", "remote", "local", "handle", "compressed", "persistent", "cluster", "peer",
	"socket", "reply", "timeout", "stored", "refused", "flushed", "message", "between",
};
#define NPLAIN_WORDS ARRAY_SIZE(plain_words)

static const char *const plain_levels[] = { "INFO", "INFO", "INFO", "DEBUG", "WARN", "NOTICE" };
/* clang-format on */

/* The next value of the stream *s, below n (from its high 32 bits). */
static unsigned plain_below(uint64_t *s, unsigned n)
{
	return pagegen_below(pagegen_rng_next(s) >> 32, n);
}

/*
 * The log line draws its fields from the stream as snprintf()'s arguments, in
 * the compiler's order of evaluation (unspecified in C: gcc and clang differ),
 * so its pages depend on the compiler, as ramster-netbench's always have.
 * Sequencing the draws would change the gcc pages; it is left as it was.
 */
void pagegen_text_plain(void *page, uint64_t seed)
{
	char buf[PAGE + TEXT_SLACK];
	size_t len = 0, room;
	uint64_t s = pagegen_mix(seed) | 1;
	unsigned day = 1 + plain_below(&s, 28), hh = plain_below(&s, 24), mm = plain_below(&s, 60);
	unsigned ss = 0, i, n;
	int k;

	while (len < PAGE) {
		room = sizeof(buf) - len;
		if (plain_below(&s, 8) == 0) {
			n = 6 + plain_below(&s, 12);
			for (i = 0; i < n && len + 16 < sizeof(buf); i++) {
				const char *w = plain_words[plain_below(&s, NPLAIN_WORDS)];

				k = snprintf(buf + len, sizeof(buf) - len, "%s%c", w,
					     i + 1 < n ? ' ' : '\n');
				len += k > 0 ? (size_t)k : 0;
			}
			continue;
		}
		ss += plain_below(&s, 4);
		if (ss >= 60) {
			ss -= 60;
			mm = (mm + 1) % 60;
		}
		k = snprintf(buf + len, room,
			     "2025-03-%02u %02u:%02u:%02u %s worker-%u: %s %s %u %s %s %u us\n",
			     day, hh, mm, ss, plain_levels[plain_below(&s, 6)], plain_below(&s, 8),
			     plain_words[plain_below(&s, NPLAIN_WORDS)],
			     plain_words[plain_below(&s, NPLAIN_WORDS)], plain_below(&s, 1024),
			     plain_words[plain_below(&s, NPLAIN_WORDS)],
			     plain_words[plain_below(&s, NPLAIN_WORDS)], plain_below(&s, 100000));
		if (k < 0 || (size_t)k >= room)
			break;
		len += (size_t)k;
	}
	memset(buf + (len < PAGE ? len : PAGE), ' ', len < PAGE ? PAGE - len : 0);
	memcpy(page, buf, PAGE);
}
