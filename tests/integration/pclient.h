/*
 * pclient.h - a small blocking proto/ client for integration tests and
 * benchmarks: connect to a worker's Unix socket, send frames, read frames
 * with a deadline.  Messages read are deep-copied into a struct pc_event
 * so they outlive the decoder.
 */
#ifndef SLUICE_TESTS_PCLIENT_H
#define SLUICE_TESTS_PCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

struct pc_conn;

#define PC_EMB_MAX 1024

struct pc_event {
	uint16_t type;
	uint64_t request_id;
	/* TOKEN: appended text (channel content) and ids; DONE/ERROR/PONG/
	 * STATS/HELLO: copied */
	char text[8192];
	uint32_t text_len;
	/* TOKEN channels reasoning and tool call (each call a line) */
	char reasoning[4096];
	uint32_t reasoning_len;
	char calls[4096];
	uint32_t calls_len;
	uint32_t ids[64];
	uint32_t n_ids;
	struct proto_done done;
	uint16_t err_code;
	char err_msg[256];
	struct proto_stats stats;
	struct proto_pong pong;
	uint32_t hello_ctx, hello_vocab, hello_blocks, hello_bt;
	char hello_model[128];
	uint32_t hello_embedding_dim;
	uint8_t hello_generates;
	/* EMBEDDING: the vector (its first PC_EMB_MAX values), index, tokens */
	float emb[PC_EMB_MAX];
	uint32_t emb_n, emb_index, emb_tokens;
	uint8_t emb_truncated;
};

/* Connects with a deadline (the worker may still be starting); NULL on failure. */
struct pc_conn *pc_connect(const char *path, int timeout_ms);
void pc_close(struct pc_conn *c);
int pc_fd(const struct pc_conn *c);

/* 0 on success. */
int pc_send(struct pc_conn *c, const struct proto_msg *m);
int pc_send_raw(struct pc_conn *c, const void *p, size_t n);

/*
 * Reads the next frame (waiting up to timeout_ms): 1 with *ev filled, 0 on
 * timeout, -1 when the connection closed or sent a malformed frame.
 */
int pc_next(struct pc_conn *c, struct pc_event *ev, int timeout_ms);

/* What came back for one request: its tokens' ids, text by channel (tool
 * calls one per line), and its DONE or ERROR. */
struct pc_outcome {
	uint32_t ids[512];
	uint32_t n_ids;
	char text[8192];
	size_t text_len;
	char calls[4096];
	size_t calls_len;
	char reasoning[4096];
	size_t reasoning_len;
	struct proto_done done;
	int finished;
	uint16_t err;
	char err_msg[256];
};

/* Adds one event to o (TOKEN, DONE, ERROR; others ignored). */
void pc_absorb(struct pc_outcome *o, const struct pc_event *ev);
/*
 * Sends msgs[0..n) (consecutive request ids) on one connection and reads
 * until each has its DONE or ERROR, into out[0..n): 0, or -1 (a send
 * failed, the connection closed, an event for another request, the
 * deadline per frame passed).
 */
int pc_run(struct pc_conn *c, struct proto_msg *msgs, uint32_t n, struct pc_outcome *out,
	   int timeout_ms);

/* A SUBMIT with sensible defaults: greedy, max_tokens, a tenant salt byte. */
void pc_submit_init(struct proto_msg *m, struct proto_submit *sb, uint64_t id,
		    const char *text, uint32_t max_tokens, uint8_t salt_byte);

#endif
