/*
 * gen_corpus_gguf.c - writes the seed corpus of fuzz_gguf (corpus/gguf/).
 *
 * Not part of the build; run by hand after changing the format code:
 *   cc -O1 -I. tests/fuzz/gen_corpus_gguf.c build/worker/libsluice_worker_core.a \
 *      build/common/libsluice_common.a -lcrypto -ljansson -lm -lpthread -o /tmp/gen &&
 *   /tmp/gen tests/fuzz/corpus/gguf
 * Seeds (each < 20 KB): tiny llama (F32), tiny qwen2 (F16, biases, tied,
 * rope_freqs), tiny llama in Q8_0, Mixtral's layout (llama with 4 experts,
 * 2 active) and qwen3moe (per-head norms, fused gate|up experts; and one
 * whose fused tensor has the wrong expert count), every value and tensor
 * type, an empty v2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/gguf_write.h"

#define CHK(x) do { if ((x) != CM_OK) { fprintf(stderr, "failed: %s\n", #x); exit(1); } } while (0)

struct mini {
	const char *arch;
	uint32_t type, embd, heads, kv_heads, ff, vocab, layers;
	int bias, tied, rope_freqs;
	uint32_t experts, used; /* a mixture of experts (0: dense) */
	int qk_norm, fused;     /* qwen3's norms; ffn_gate_up_exps */
	int bad_fused;          /* ffn_gate_up_exps with twice the experts (refused) */
};

static void tensor3(struct wk_gguf_writer *w, const char *name, uint32_t type, uint32_t nd,
		    uint64_t d0, uint64_t d1, uint64_t d2)
{
	uint64_t dims[3] = { d0, d1, d2 };
	uint64_t nb = wk_qtype_row_bytes(type, d0) * (nd > 1 ? d1 : 1) * (nd > 2 ? d2 : 1);
	uint8_t *d = calloc(1, nb);

	for (uint64_t i = 0; i < nb; i++)
		d[i] = (uint8_t)(i * 7);
	if (type == WK_Q_F32)
		for (uint64_t i = 0; i < nb / 4; i++) {
			float f = 0.01f * (float)(i % 17);

			memcpy(d + 4 * i, &f, 4);
		}
	CHK(wk_gguf_writer_add_tensor(w, name, type, nd, dims, d, nb));
	free(d);
}

static void tensor(struct wk_gguf_writer *w, const char *name, uint32_t type, uint32_t nd,
		   uint64_t d0, uint64_t d1)
{
	tensor3(w, name, type, nd, d0, d1, 1);
}

static void write_mini(const char *dir, const char *file, const struct mini *m)
{
	struct wk_gguf_writer *w;
	char key[96], name[64], path[512];
	const char **toks = calloc(m->vocab, sizeof(*toks));
	char (*store)[8] = calloc(m->vocab, 8);
	float *scores = calloc(m->vocab, sizeof(float));
	int32_t *types = calloc(m->vocab, sizeof(int32_t));
	uint32_t hd = m->embd / m->heads;

	for (uint32_t i = 0; i < m->vocab; i++) {
		if (i == 0)
			snprintf(store[i], 8, "<unk>");
		else if (i < 3)
			snprintf(store[i], 8, i == 1 ? "<s>" : "</s>");
		else
			snprintf(store[i], 8, "%c%c", 'a' + i % 26, 'a' + i / 26);
		toks[i] = store[i];
		scores[i] = -(float)i;
		types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
	}
	CHK(wk_gguf_writer_new(&w));
	CHK(wk_gguf_writer_add_str(w, "general.architecture", m->arch));
	CHK(wk_gguf_writer_set_alignment(w, 32, 1));
#define K(s) (snprintf(key, sizeof(key), "%s.%s", m->arch, s), key)
	CHK(wk_gguf_writer_add_u32(w, K("context_length"), 64));
	CHK(wk_gguf_writer_add_u32(w, K("embedding_length"), m->embd));
	CHK(wk_gguf_writer_add_u32(w, K("block_count"), m->layers));
	CHK(wk_gguf_writer_add_u32(w, K("feed_forward_length"), m->ff));
	CHK(wk_gguf_writer_add_u32(w, K("attention.head_count"), m->heads));
	CHK(wk_gguf_writer_add_u32(w, K("attention.head_count_kv"), m->kv_heads));
	CHK(wk_gguf_writer_add_f32(w, K("rope.freq_base"), 10000.0f));
	CHK(wk_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f));
	if (m->experts) {
		CHK(wk_gguf_writer_add_u32(w, K("expert_count"), m->experts));
		CHK(wk_gguf_writer_add_u32(w, K("expert_used_count"), m->used));
		CHK(wk_gguf_writer_add_bool(w, K("expert_weights_norm"), 1));
	}
	CHK(wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama"));
	CHK(wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, m->vocab));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.scores", WK_GGUF_F32, scores, m->vocab));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", WK_GGUF_I32, types, m->vocab));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2));
	CHK(wk_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 1));
	CHK(wk_gguf_writer_add_str(w, "tokenizer.chat_template",
				   "{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}"));
	tensor(w, "token_embd.weight", m->type, 2, m->embd, m->vocab);
	if (m->rope_freqs)
		tensor(w, "rope_freqs.weight", WK_Q_F32, 1, hd / 2, 1);
	for (uint32_t l = 0; l < m->layers; l++) {
#define T(what, ty, nd, d0, d1) snprintf(name, sizeof(name), "blk.%u.%s", l, what); \
		tensor(w, name, ty, nd, d0, d1)
		T("attn_norm.weight", WK_Q_F32, 1, m->embd, 1);
		T("attn_q.weight", m->type, 2, m->embd, m->heads * hd);
		T("attn_k.weight", m->type, 2, m->embd, m->kv_heads * hd);
		T("attn_v.weight", m->type, 2, m->embd, m->kv_heads * hd);
		if (m->bias) {
			T("attn_q.bias", WK_Q_F32, 1, m->heads * hd, 1);
			T("attn_k.bias", WK_Q_F32, 1, m->kv_heads * hd, 1);
			T("attn_v.bias", WK_Q_F32, 1, m->kv_heads * hd, 1);
		}
		T("attn_output.weight", m->type, 2, m->heads * hd, m->embd);
		if (m->qk_norm) {
			T("attn_q_norm.weight", WK_Q_F32, 1, hd, 1);
			T("attn_k_norm.weight", WK_Q_F32, 1, hd, 1);
		}
		T("ffn_norm.weight", WK_Q_F32, 1, m->embd, 1);
		if (m->experts) {
			T("ffn_gate_inp.weight", WK_Q_F32, 2, m->embd, m->experts);
#define T3(what, d0, d1) snprintf(name, sizeof(name), "blk.%u.%s", l, what); \
			tensor3(w, name, m->type, 3, d0, d1, m->experts)
			if (m->fused) {
				snprintf(name, sizeof(name), "blk.%u.%s", l, "ffn_gate_up_exps.weight");
				tensor3(w, name, m->type, 3, m->embd, 2 * m->ff,
					m->experts * (m->bad_fused ? 2 : 1));
			} else {
				T3("ffn_gate_exps.weight", m->embd, m->ff);
				T3("ffn_up_exps.weight", m->embd, m->ff);
			}
			T3("ffn_down_exps.weight", m->ff, m->embd);
#undef T3
		} else {
			T("ffn_gate.weight", m->type, 2, m->embd, m->ff);
			T("ffn_up.weight", m->type, 2, m->embd, m->ff);
			T("ffn_down.weight", m->type, 2, m->ff, m->embd);
		}
#undef T
	}
	tensor(w, "output_norm.weight", WK_Q_F32, 1, m->embd, 1);
	if (!m->tied)
		tensor(w, "output.weight", m->type, 2, m->embd, m->vocab);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	CHK(wk_gguf_writer_write_file(w, path, NULL, 0));
	wk_gguf_writer_free(w);
	free(toks);
	free(store);
	free(scores);
	free(types);
}

static void write_all_types(const char *dir)
{
	static const uint32_t tt[] = { WK_Q_F32, WK_Q_F16, WK_Q_BF16, WK_Q_Q8_0, WK_Q_Q4_0,
				       WK_Q_Q4_K, WK_Q_Q5_K, WK_Q_Q6_K };
	struct wk_gguf_writer *w;
	char path[512], name[32];
	const char *strs[3] = { "x", "", "\xe2\x96\x81y" };
	const int16_t i16[2] = { -1, 2 };
	const double f64[1] = { 0.5 };
	uint8_t nested[4 + 8 + 4 + 8 + 2];
	uint32_t t_arr = WK_GGUF_ARRAY, t_u8 = WK_GGUF_U8;
	uint64_t one = 1, two = 2;

	memcpy(nested, &t_arr, 4);
	memcpy(nested + 4, &one, 8);
	memcpy(nested + 12, &t_u8, 4);
	memcpy(nested + 16, &two, 8);
	nested[24] = 1;
	nested[25] = 2;
	CHK(wk_gguf_writer_new(&w));
	CHK(wk_gguf_writer_add_u8(w, "a.u8", 1));
	CHK(wk_gguf_writer_add_i8(w, "a.i8", -1));
	CHK(wk_gguf_writer_add_u16(w, "a.u16", 2));
	CHK(wk_gguf_writer_add_i16(w, "a.i16", -2));
	CHK(wk_gguf_writer_add_u32(w, "a.u32", 3));
	CHK(wk_gguf_writer_add_i32(w, "a.i32", -3));
	CHK(wk_gguf_writer_add_f32(w, "a.f32", 1.5f));
	CHK(wk_gguf_writer_add_bool(w, "a.bool", 1));
	CHK(wk_gguf_writer_add_str(w, "a.str", "text"));
	CHK(wk_gguf_writer_add_u64(w, "a.u64", 4));
	CHK(wk_gguf_writer_add_i64(w, "a.i64", -4));
	CHK(wk_gguf_writer_add_f64(w, "a.f64", 2.5));
	CHK(wk_gguf_writer_add_arr_str(w, "a.arr_str", strs, NULL, 3));
	CHK(wk_gguf_writer_add_arr(w, "a.arr_i16", WK_GGUF_I16, i16, 2));
	CHK(wk_gguf_writer_add_arr(w, "a.arr_f64", WK_GGUF_F64, f64, 1));
	CHK(wk_gguf_writer_add_raw(w, "a.nested", WK_GGUF_ARRAY, nested, sizeof(nested)));
	for (size_t i = 0; i < sizeof(tt) / sizeof(tt[0]); i++) {
		snprintf(name, sizeof(name), "t.%zu", i);
		tensor(w, name, tt[i], 1, 256, 1);
	}
	snprintf(path, sizeof(path), "%s/all_types.gguf", dir);
	CHK(wk_gguf_writer_write_file(w, path, NULL, 0));
	wk_gguf_writer_free(w);

	CHK(wk_gguf_writer_new(&w));
	wk_gguf_writer_set_version(w, 2);
	CHK(wk_gguf_writer_add_str(w, "general.architecture", "llama"));
	snprintf(path, sizeof(path), "%s/empty_v2.gguf", dir);
	CHK(wk_gguf_writer_write_file(w, path, NULL, 0));
	wk_gguf_writer_free(w);
}

int main(int argc, char **argv)
{
	const struct mini llama = { "llama", WK_Q_F32, 16, 2, 1, 16, 32, 1, 0, 0, 0, 0, 0, 0, 0, 0 };
	const struct mini qwen = { "qwen2", WK_Q_F16, 16, 2, 1, 32, 24, 2, 1, 1, 1, 0, 0, 0, 0, 0 };
	const struct mini q8 = { "llama", WK_Q_Q8_0, 32, 2, 1, 32, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0 };
	const struct mini mixtral = { "llama", WK_Q_F32, 16, 2, 1, 8, 24, 1, 0, 0, 0, 4, 2, 0, 0, 0 };
	const struct mini q3moe = { "qwen3moe", WK_Q_F16, 16, 2, 1, 8, 24, 2, 0, 1, 0, 4, 2, 1, 1, 0 };
	const struct mini q3bad = { "qwen3moe", WK_Q_F16, 16, 2, 1, 8, 24, 2, 0, 1, 0, 4, 2, 1, 1, 1 };

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	write_mini(argv[1], "llama_f32.gguf", &llama);
	write_mini(argv[1], "qwen2_f16_tied.gguf", &qwen);
	write_mini(argv[1], "llama_q8_0.gguf", &q8);
	write_mini(argv[1], "mixtral_f32.gguf", &mixtral);
	write_mini(argv[1], "qwen3moe_f16_fused.gguf", &q3moe);
	write_mini(argv[1], "qwen3moe_fused_bad_shape.gguf", &q3bad);
	write_all_types(argv[1]);
	return 0;
}
