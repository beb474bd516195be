/*
 * test_worker_experts.c - real sluice-worker processes on a generated
 * mixture of experts (moe-tiny, Q8_0: strip kernels on AVX2 and AVX-512)
 * and the experts' cache file (worker.expert_cache, expert_cache_dir):
 *  - the first worker writes the file (worker_ready: expert_cache_bytes,
 *    on AVX-512 the size `sluice-model plan` prints, expert_cache_built
 *    true, an expert_cache_written line), a second one on the same model
 *    reuses it (built false);
 *  - a worker with expert_cache false, and one whose expert_cache_dir
 *    cannot be created (it logs expert_cache_unavailable, naming it, and
 *    serves), read the experts from the model file;
 *  - all four give the same tokens and final-logits digests for the same
 *    12 requests, run together.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/harness.h"
#include "tests/integration/pclient.h"

#define TIMEOUT_MS 120000
enum { N = 12, W = 4 };

static const char *const words[] = { "garden", "lamp",	 "seven", "river", "table", "copper",
				     "north",  "window", "stone", "amber", "cloud", "meadow" };

/* The worker's log, which must hold `want` (NULL: anything). */
static char *log_of(const struct h_proc *p, const char *want)
{
	char *log = h_read_file(p->log, NULL);

	assert_non_null(log);
	if (want && !strstr(log, want))
		fail_msg("no %s in %s:\n%s", want, p->log, log);
	return log;
}

/* worker_ready's expert_cache_bytes. */
static long long cache_bytes(const char *log)
{
	const char *at = strstr(log, "\"expert_cache_bytes\":");

	if (!at)
		fail_msg("no expert_cache_bytes in worker_ready:\n%s", log);
	return strtoll(at + strlen("\"expert_cache_bytes\":"), NULL, 10);
}

static void test_cache_written_reused_and_optional(void **state)
{
	static struct proto_msg msgs[W][N];
	static struct proto_submit sbs[W][N];
	static struct pc_outcome out[W][N];
	static const char *const names[W] = { "xc-first", "xc-again", "xc-off", "xc-bad" };
	struct h_proc w[W];
	char socks[W][600], extra[W][1200], prompt[N][200], plain[600];
	const char *model = h_model("moe-tiny", "Q8_0", "llama");
	FILE *f;
	(void)state;

	assert_non_null(model);
	snprintf(plain, sizeof(plain), "%s/plainfile", h_tmpdir());
	f = fopen(plain, "w");
	assert_non_null(f);
	fclose(f);
	for (int i = 0; i < W; i++)
		snprintf(extra[i], sizeof(extra[i]),
			 "\"threads\": 2, \"kv_cache_bytes\": \"16MiB\"%s%s%s",
			 i == 2 ? ", \"expert_cache\": false" : "",
			 i == 3 ? ", \"expert_cache_dir\": \"" : "", i == 3 ? plain : "");
	strncat(extra[3], "/sub\"", sizeof(extra[3]) - strlen(extra[3]) - 1);
	for (int i = 0; i < N; i++) {
		snprintf(prompt[i], sizeof(prompt[i]), "%s %s %s %s", words[i], words[(i + 5) % N],
			 words[(i * 7 + 1) % N], i % 2 ? words[(i + 3) % N] : "");
		for (int k = 0; k < W; k++) {
			pc_submit_init(&msgs[k][i], &sbs[k][i], 100 + (uint64_t)i, prompt[i],
				       6 + (uint32_t)i % 5, 1);
			msgs[k][i].flags |= PROTO_SUBMIT_F_DIGEST | PROTO_SUBMIT_F_IGNORE_EOS;
		}
	}
	for (int k = 0; k < W; k++) {
		/* one at a time: the second finds the file the first wrote */
		struct pc_conn *c;
		struct pc_event ev;

		assert_int_equal(h_worker_start_model(&w[k], names[k], model, extra[k], socks[k],
						      sizeof(socks[k])),
				 0);
		c = pc_connect(socks[k], TIMEOUT_MS);
		assert_non_null(c);
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		assert_int_equal(ev.type, PROTO_HELLO);
		assert_int_equal(pc_run(c, msgs[k], N, out[k], TIMEOUT_MS), 0);
		pc_close(c);
	}
	{
		char *l0 = log_of(&w[0], "\"worker_ready\""), *l1 = log_of(&w[1], NULL);
		char *l2 = log_of(&w[2], NULL), *l3 = log_of(&w[3], NULL);
		int simd = strstr(l0, "(avx") != NULL; /* AVX2 and AVX-512 have Q8_0 strips */

		if (simd) {
			assert_true(cache_bytes(l0) > 0);
			assert_non_null(strstr(l0, "\"expert_cache_built\":true"));
			assert_non_null(strstr(l0, "expert_cache_written"));
			assert_int_equal(cache_bytes(l1), cache_bytes(l0));
			assert_non_null(strstr(l1, "\"expert_cache_built\":false"));
			if (strstr(l0, "(avx512")) { /* what sluice-model plan says */
				char cmd[1200], *txt, *at;
				int st;

				snprintf(cmd, sizeof(cmd), "'%s' plan '%s' --memory 1GiB --context 512",
					 h_bin("tools/sluice-model"), model);
				txt = h_run_capture(cmd, &st);
				at = txt ? strstr(txt, "expert cache: ") : NULL;
				assert_non_null(at);
				assert_int_equal(strtoll(at + strlen("expert cache: "), NULL, 10),
						 cache_bytes(l0));
				free(txt);
			}
			if (!strstr(l3, "expert_cache_unavailable") ||
			    !strstr(l3, "cannot create the directory") || !strstr(l3, plain))
				fail_msg("expected the directory named:\n%s", l3);
		}
		assert_int_equal(cache_bytes(l2), 0);
		assert_int_equal(cache_bytes(l3), 0);
		assert_null(strstr(l2, "expert_cache_unavailable"));
		free(l0);
		free(l1);
		free(l2);
		free(l3);
	}
	for (int k = 1; k < W; k++)
		for (int i = 0; i < N; i++) {
			if (out[k][i].err)
				fail_msg("%s request %d: ERROR %u %s", names[k], i, out[k][i].err,
					 out[k][i].err_msg);
			assert_int_equal(out[k][i].n_ids, out[0][i].n_ids);
			assert_memory_equal(out[k][i].ids, out[0][i].ids,
					    out[0][i].n_ids * sizeof(uint32_t));
			assert_memory_equal(out[k][i].done.logits_digest, out[0][i].done.logits_digest,
					    32);
		}
	for (int k = 0; k < W; k++)
		assert_int_equal(h_stop(&w[k], 30000), 0);
	h_cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_written_reused_and_optional),
	};

	return cmocka_run_group_tests_name("integration/worker_experts", tests, NULL, NULL);
}
