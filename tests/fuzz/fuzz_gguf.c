/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader and the model config.
 *
 * Opens the input with wk_gguf_open_mem; on success walks every key with
 * every typed getter, every string array element, every numeric array's
 * bytes and every tensor's first and last data byte (ASan checks they lie
 * inside the input), then runs wk_mcfg_load.  Any crash, sanitizer report
 * or leak is a finding; error returns are expected.
 * Seed corpus: corpus/gguf/ (tiny valid files from sluice-model synth and
 * the writer).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "worker/model/gguf.h"
#include "worker/model/model_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_key(const struct wk_gguf *g, const char *key)
{
	struct wk_gguf_str s;
	enum wk_gguf_vtype et;
	uint64_t count, u64;
	uint32_t u32;
	int64_t i64;
	float f;
	int b;

	if (wk_gguf_get_u32(g, key, &u32) == CM_OK)
		sink += u32;
	if (wk_gguf_get_u64(g, key, &u64) == CM_OK)
		sink += u64;
	if (wk_gguf_get_i64(g, key, &i64) == CM_OK)
		sink += (uint64_t)i64;
	if (wk_gguf_get_f32(g, key, &f) == CM_OK)
		sink += (uint64_t)(f == f);
	if (wk_gguf_get_bool(g, key, &b) == CM_OK)
		sink += (uint64_t)b;
	if (wk_gguf_get_str(g, key, &s) == CM_OK && s.len)
		sink += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
	if (wk_gguf_get_arr(g, key, &et, &count) != CM_OK)
		return;
	if (et == WK_GGUF_STRING) {
		for (uint64_t i = 0; i < count; i++)
			if (wk_gguf_arr_str(g, key, i, &s) == CM_OK && s.len)
				sink += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
		if (wk_gguf_arr_str(g, key, count, &s) == CM_OK)
			__builtin_trap(); /* past the end must be refused */
	} else if (et != WK_GGUF_ARRAY && count) {
		static const uint8_t sizes[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
		const uint8_t *p = wk_gguf_arr_data(g, key);

		if (!p)
			__builtin_trap();
		sink += p[0] + p[count * sizes[et] - 1];
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	char err[256];

	if (wk_gguf_open_mem(data, size, &g, err, sizeof(err)) != CM_OK) {
		if (!err[0])
			__builtin_trap(); /* every error has a message */
		return 0;
	}
	for (uint64_t i = 0; i < wk_gguf_n_kv(g); i++) {
		const char *key = wk_gguf_key_name(g, i);

		if (wk_gguf_find_key(g, key) != (int64_t)i)
			__builtin_trap();
		walk_key(g, key);
	}
	for (uint64_t i = 0; i < wk_gguf_n_tensors(g); i++) {
		const struct wk_gguf_tensor *t = wk_gguf_tensor(g, i);
		const uint8_t *p = t->data;

		if (wk_gguf_find_tensor(g, t->name) != t)
			__builtin_trap();
		sink += p[0] + p[t->n_bytes - 1];
	}
	if (wk_mcfg_load(g, &c, err, sizeof(err)) == CM_OK) {
		sink += c->n_params + c->kv_bytes_per_token;
		for (uint32_t l = 0; l < c->hp.n_layer; l++) {
			const struct wk_layer *L = &c->layers[l];

			sink += L->w_down.rows * L->w_down.row_bytes;
			/* a mixture of experts: the last byte of the last expert of
			 * each expert view lies inside the input */
			for (int k = 0; k < 3 && c->hp.n_expert; k++) {
				const struct wk_tensor *t = k == 0 ? &L->exp_gate
							    : k == 1 ? &L->exp_up : &L->exp_down;
				struct wk_tensor x = wk_tensor_expert(t, c->hp.n_expert - 1);

				sink += ((const uint8_t *)x.data)[x.rows * x.row_bytes - 1];
			}
		}
		wk_mcfg_free(c);
	} else if (!err[0]) {
		__builtin_trap();
	}
	wk_gguf_close(g);
	return 0;
}
