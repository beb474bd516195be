/*
 * fake_worker.h - a stand-in sluice-worker for the gateway's unit tests:
 * a listening Unix socket on the test's event loop that speaks proto/ as
 * the worker does.  On accept: HELLO (model "tiny", max_seqs 4, 64 KV
 * blocks) and STATS; PING: PONG ok and STATS; SUBMIT: two TOKENs ("a",
 * "b") and DONE (5 prompt tokens, 2 cached), or ERROR bad request with
 * FAKE_WORKER_REASON for the text prompt "fail", ERROR too long with
 * FAKE_WORKER_TOO_LONG for "long", or nothing while `hold`;
 * CANCEL: counted.  hello_max_seqs, hello_version and done_gen_tokens
 * make it announce what a hostile worker would.  A unit test's stand-in,
 * never a test of the worker.
 */
#ifndef SLUICE_TESTS_GATEWAY_FAKE_WORKER_H
#define SLUICE_TESTS_GATEWAY_FAKE_WORKER_H

#include <stdint.h>

#include <event2/event.h>

#include "proto/proto.h"

#define FAKE_WORKER_REASON "prompt: the worker's own reason"
#define FAKE_WORKER_TOO_LONG "prompt of 9 tokens plus max_tokens 9 exceeds the context of 8 tokens"

struct fake_worker {
	struct event_base *base;
	char path[108];
	int lfd, fd;
	struct event *lev, *cev;
	struct proto_decoder *dec;
	int hold;                  /* keep SUBMITs without answering */
	int submits, cancels, accepts;
	uint8_t last_cancel_reason;
	uint64_t held[512];
	int n_held;
	/* a hostile worker (0: the defaults above) */
	uint32_t hello_max_seqs;
	uint32_t hello_context;    /* context_len (0: 256) */
	uint16_t hello_version;
	uint32_t done_gen_tokens;
	int mute;                  /* after HELLO: answers nothing, not even PING */
};

/* Listens on `path` (replaced); 0, or -1. */
int fake_worker_start(struct fake_worker *fk, struct event_base *base, const char *path);
void fake_worker_stop(struct fake_worker *fk);
/* Sends DONE for `id` with `finish`. */
void fake_worker_done(struct fake_worker *fk, uint64_t id, uint8_t finish);
/* Closes the connection (the worker "dies"); the listener stays. */
void fake_worker_drop(struct fake_worker *fk);

#endif
