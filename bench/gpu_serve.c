/*
 * gpu_serve.c - `bench-gpu-serve`: load through a running `sluice-worker serve`
 * over its Unix socket (the proto/ protocol, tests/integration/pclient.h),
 * for bench/gpu-check.sh.
 *
 *   bench-gpu-serve --socket PATH [--conc 8] [--prompt-words 32] [--gen 64]
 *               [--timeout-s 120]
 *
 * Submits --conc requests at once on one connection (greedy, EOS ignored,
 * a distinct cache salt and prompt each, so no prefix-cache hits), reads
 * TOKEN/DONE frames until all are done, and prints one key=value line:
 *   decode_tok_s   tokens that arrived while ALL requests were decoding
 *                  (after the last first token, before the first DONE)
 *                  over that window; the whole run's tokens/wall when the
 *                  window is empty
 *   itl_p50/p99_ms inter-token latency: gap between consecutive TOKEN
 *                  frames of a request, divided by the tokens in the later one
 *   ttft_p50/p99_ms submit -> first TOKEN, measured here
 *   prompt_tokens  mean prompt length the worker reported in DONE
 * Exit 1 on a protocol error or timeout (partial numbers are still printed).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "proto/proto.h"
#include "tests/integration/pclient.h"

struct rq {
	int64_t t_submit, t_first, t_last, t_done;
	uint32_t n_tok, prompt_tokens;
	int done;
};

struct tev {
	int64_t t;
	uint32_t n;
};

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct_ms(int64_t *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[(size_t)(p * (double)(n - 1) + 0.5)] / 1e6;
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return def;
}

int main(int argc, char **argv)
{
	const char *sock = arg(argc, argv, "--socket", NULL);
	uint32_t conc = (uint32_t)atoi(arg(argc, argv, "--conc", "8"));
	uint32_t words = (uint32_t)atoi(arg(argc, argv, "--prompt-words", "32"));
	uint32_t gen = (uint32_t)atoi(arg(argc, argv, "--gen", "64"));
	int64_t timeout_ns = (int64_t)atoi(arg(argc, argv, "--timeout-s", "120")) * 1000000000LL;
	struct pc_conn *c;
	struct pc_event *ev = cm_malloc(sizeof(*ev));
	struct rq *r;
	struct tev *tv;
	int64_t *itl, *ttft, t0, t_win0 = 0, t_win1 = INT64_MAX;
	size_t n_itl = 0, n_tv = 0, cap_tv, n_ttft = 0;
	uint32_t n_done = 0, n_err = 0, n_ok = 0;
	uint64_t total = 0, win_tok = 0, prompt_sum = 0;
	int rc = 0;
	char **texts;

	if (!sock || conc == 0 || gen == 0 || !ev) {
		fprintf(stderr, "usage: bench-serve --socket PATH [--conc N] [--prompt-words W] "
				"[--gen G] [--timeout-s S]\n");
		return 2;
	}
	cap_tv = (size_t)conc * gen + 16;
	r = cm_calloc(conc, sizeof(*r));
	tv = cm_calloc(cap_tv, sizeof(*tv));
	itl = cm_calloc(cap_tv, sizeof(*itl));
	ttft = cm_calloc(conc, sizeof(*ttft));
	texts = cm_calloc(conc, sizeof(*texts));
	if (!r || !tv || !itl || !ttft || !texts)
		return 1;
	c = pc_connect(sock, 60000);
	if (!c || pc_next(c, ev, 60000) != 1 || ev->type != PROTO_HELLO) {
		fprintf(stderr, "bench-serve: no HELLO from %s\n", sock);
		return 1;
	}
	/* prompts: distinct words per request ("a17 b3 ..."), ~1-3 tokens each */
	for (uint32_t i = 0; i < conc; i++) {
		size_t len = (size_t)words * 12 + 1, off = 0;

		texts[i] = cm_malloc(len);
		if (!texts[i])
			return 1;
		texts[i][0] = '\0';
		for (uint32_t w = 0; w < words && off + 12 < len; w++)
			off += (size_t)snprintf(texts[i] + off, len - off, "%c%u ",
						'a' + (char)((w + i) % 26), (w * 7 + i * 13) % 100);
	}
	t0 = cm_mono_ns();
	for (uint32_t i = 0; i < conc; i++) {
		struct proto_msg m;
		struct proto_submit sb;

		pc_submit_init(&m, &sb, i + 1, texts[i], gen, (uint8_t)(i * 7 + 1));
		m.flags |= PROTO_SUBMIT_F_IGNORE_EOS;
		r[i].t_submit = cm_mono_ns();
		if (pc_send(c, &m) != 0) {
			fprintf(stderr, "bench-serve: send failed\n");
			return 1;
		}
	}
	while (n_done < conc) {
		int got = pc_next(c, ev, 1000);
		int64_t now = cm_mono_ns();
		struct rq *q;

		if (now - t0 > timeout_ns) {
			fprintf(stderr, "bench-serve: timeout after %u of %u done\n", n_done, conc);
			rc = 1;
			break;
		}
		if (got == 0)
			continue;
		if (got < 0) {
			fprintf(stderr, "bench-serve: connection closed\n");
			rc = 1;
			break;
		}
		if (ev->request_id == 0 || ev->request_id > conc)
			continue; /* STATS and connection-wide frames */
		q = &r[ev->request_id - 1];
		if (ev->type == PROTO_TOKEN) {
			uint32_t n = ev->n_ids ? ev->n_ids : 1;

			if (q->n_tok == 0)
				q->t_first = now;
			else if (n_itl < cap_tv)
				itl[n_itl++] = (now - q->t_last) / n;
			q->t_last = now;
			q->n_tok += n;
			total += n;
			if (n_tv < cap_tv)
				tv[n_tv++] = (struct tev){ now, n };
		} else if (ev->type == PROTO_DONE) {
			q->done = 1;
			q->t_done = now;
			q->prompt_tokens = ev->done.prompt_tokens;
			n_done++;
		} else if (ev->type == PROTO_ERROR) {
			fprintf(stderr, "bench-serve: request %llu: error %u %s\n",
				(unsigned long long)ev->request_id, ev->err_code, ev->err_msg);
			q->done = 1;
			n_done++;
			n_err++;
			rc = 1;
		}
	}
	for (uint32_t i = 0; i < conc; i++) {
		if (r[i].n_tok == 0)
			continue; /* failed or unfinished: no TTFT, not in the window */
		ttft[n_ttft++] = r[i].t_first - r[i].t_submit;
		if (r[i].t_first > t_win0)
			t_win0 = r[i].t_first;
		if (r[i].t_done && r[i].t_done < t_win1)
			t_win1 = r[i].t_done;
		if (r[i].t_done) {
			prompt_sum += r[i].prompt_tokens;
			n_ok++;
		}
	}
	for (size_t i = 0; i < n_tv; i++)
		if (tv[i].t > t_win0 && tv[i].t <= t_win1)
			win_tok += tv[i].n;
	{
		double wall = (cm_mono_ns() - t0) / 1e9;
		double dec = (t_win1 > t_win0 && t_win1 != INT64_MAX && win_tok > 0)
				     ? win_tok / ((t_win1 - t_win0) / 1e9)
				     : total / wall;

		printf("conc=%u gen=%u ok=%u errors=%u prompt_tokens=%.0f total_tokens=%llu "
		       "wall_s=%.2f decode_tok_s=%.1f itl_p50_ms=%.2f itl_p99_ms=%.2f "
		       "ttft_p50_ms=%.1f ttft_p99_ms=%.1f\n",
		       conc, gen, n_ok, n_err, n_ok ? (double)prompt_sum / n_ok : 0.0,
		       (unsigned long long)total, wall, dec, pct_ms(itl, n_itl, 0.5),
		       pct_ms(itl, n_itl, 0.99), pct_ms(ttft, n_ttft, 0.5), pct_ms(ttft, n_ttft, 0.99));
	}
	pc_close(c);
	return rc;
}
