/*
 * stop.h - stop-string matcher for streamed text, across token boundaries.
 *
 * Owns: copies of the stop strings, one KMP automaton state per string and
 * the bytes held back (released by tokens but not yet emitted).
 * Thread: one sequence, one thread at a time.
 *
 * The worker feeds the UTF-8 bytes each token releases.  Each feed says how
 * many bytes may be streamed now: text that could still be the start of a
 * stop string is held back, as is any trailing incomplete UTF-8 character,
 * and an emitted span never ends inside a multi-byte character.  When a stop
 * string completes, everything before it is emitted and the stop string and
 * anything after it never are.
 *
 * Which stop wins: the matcher stops at the first byte of the stream where
 * any stop string ends; if several end at that byte, the longest one (the
 * earliest start) is cut.  This depends only on the text, not on how it was
 * split into tokens.
 *
 * Bounds: at most WK_STOP_MAX_STRINGS strings of 1..WK_STOP_MAX_BYTES bytes;
 * the hold-back is at most WK_STOP_MAX_BYTES + 2 bytes (longest partial
 * match plus an incomplete character); one feed is at most
 * WK_STOP_FEED_MAX_BYTES.
 */
#ifndef SLUICE_WORKER_ENGINE_STOP_H
#define SLUICE_WORKER_ENGINE_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/status.h"

#define WK_STOP_MAX_STRINGS CM_LIM_PROTO_STOP_STRINGS_HARD
#define WK_STOP_MAX_BYTES CM_LIM_STOP_STRING_BYTES
#define WK_STOP_FEED_MAX_BYTES (64u * 1024)

struct wk_stop;

/*
 * Creates a matcher for n stop strings strs[i] of lens[i] bytes (copied).
 * n == 0 gives a pass-through matcher that still never splits a UTF-8
 * character.  CM_EINVAL with a message naming the string (too many, empty,
 * too long), CM_ENOMEM.
 */
enum cm_status wk_stop_new(const char *const *strs, const size_t *lens,
			   size_t n, struct wk_stop **out, char *err,
			   size_t err_len) CM_WUR;
/* NULL is a no-op. */
void wk_stop_free(struct wk_stop *s);

struct wk_stop_out {
	const uint8_t *text; /* bytes to emit now; valid until the next call */
	size_t len;
	bool matched;        /* a stop string matched: generation ends */
};

/*
 * Feeds `len` bytes released by one token.  After a match every further feed
 * emits nothing and reports matched again.  CM_ELIMIT when len is over
 * WK_STOP_FEED_MAX_BYTES (nothing consumed), CM_ENOMEM.
 */
enum cm_status wk_stop_feed(struct wk_stop *s, const void *bytes, size_t len,
			    struct wk_stop_out *out) CM_WUR;

/*
 * End of generation (EOS, max tokens): emits everything held back, including
 * an incomplete trailing character as raw bytes, and resets the partial
 * matches.  After a match it emits nothing.
 */
void wk_stop_flush(struct wk_stop *s, struct wk_stop_out *out);

/* Bytes currently held back (tests, metrics). */
size_t wk_stop_held(const struct wk_stop *s);

#endif
