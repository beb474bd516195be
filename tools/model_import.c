/*
 * model_import.c - `sluice-model import llama2c`: a llama2.c checkpoint
 * (the legacy format: a header of 7 int32, then float32 tensors) and its
 * tokenizer.bin, written as a `llama` GGUF with F32 tensors.
 *
 * The checkpoint is mapped read-only and its tensors are streamed to the
 * output by the writer's fill callback (a 7B checkpoint is never copied in
 * memory).  The header, every size and the file length are checked before
 * anything is written; errors name the file, what was expected and what
 * was found.  Single-threaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "tools/gguf_write.h"
#include "tools/model_cli.h"
#include "tools/model_import.h"
#include "worker/model/quant.h"
#include "worker/text/tokenizer.h"

static enum cm_status l2c_fill(void *ctx, struct wk_gguf_writer *w, uint64_t index)
{
	const struct model_l2c *im = ctx;
	const struct l2c_tensor *t = &im->t[index];

	return wk_gguf_writer_emit(w, t->data, t->dims[0] * t->dims[1] * sizeof(float));
}

/* Checks the header; fills im->c and im->tied. */
static enum cm_status l2c_header(struct model_l2c *im, const char *path, char *err,
				 size_t err_len)
{
	struct l2c_config *c = &im->c;

	if (im->map_len < sizeof(*c)) {
		snprintf(err, err_len, "%s: expected a llama2.c checkpoint header of %zu bytes, "
			 "found a file of %zu bytes", path, sizeof(*c), im->map_len);
		return CM_EFORMAT;
	}
	memcpy(c, im->map, sizeof(*c));
	im->tied = c->vocab_size > 0;
	if (c->vocab_size < 0 && c->vocab_size > -(int32_t)L2C_MAX_VOCAB - 1)
		c->vocab_size = -c->vocab_size;
	if (c->dim <= 0 || (uint32_t)c->dim > L2C_MAX_DIM || c->hidden_dim <= 0 ||
	    (uint32_t)c->hidden_dim > 4 * L2C_MAX_DIM || c->n_layers <= 0 ||
	    (uint32_t)c->n_layers > L2C_MAX_LAYERS || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
	    c->n_heads % c->n_kv_heads != 0 || c->dim % c->n_heads != 0 ||
	    (c->dim / c->n_heads) % 2 != 0 || c->vocab_size <= 3 ||
	    (uint32_t)c->vocab_size > L2C_MAX_VOCAB || c->seq_len <= 0 ||
	    (uint32_t)c->seq_len > L2C_MAX_SEQ) {
		snprintf(err, err_len, "%s: expected a llama2.c header (dim, hidden_dim, n_layers, "
			 "n_heads, n_kv_heads dividing n_heads, vocab_size, seq_len, all positive "
			 "and in range, an even head size), found %d %d %d %d %d %d %d", path,
			 c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
			 c->vocab_size, c->seq_len);
		return CM_EFORMAT;
	}
	return CM_OK;
}

/* Lays the tensors out over the mapping, in llama2.c's order. */
static enum cm_status l2c_tensors(struct model_l2c *im, const char *path, char *err,
				  size_t err_len)
{
	const struct l2c_config *c = &im->c;
	const uint64_t dim = (uint64_t)c->dim, hid = (uint64_t)c->hidden_dim;
	const uint64_t kv = dim / (uint64_t)c->n_heads * (uint64_t)c->n_kv_heads;
	const uint64_t L = (uint64_t)c->n_layers, V = (uint64_t)c->vocab_size;
	const uint64_t hs = dim / (uint64_t)c->n_heads;
	/* per-layer groups: GGUF name, rows (out), cols (in); cols 1 = a vector */
	static const char *const names[] = { "attn_norm", "attn_q", "attn_k", "attn_v",
		"attn_output", "ffn_norm", "ffn_gate", "ffn_down", "ffn_up" };
	const uint64_t rows[] = { dim, dim, kv, kv, dim, dim, hid, dim, hid };
	const uint64_t cols[] = { 1, dim, dim, dim, dim, 1, dim, hid, dim };
	const float *p = (const float *)(im->map + sizeof(struct l2c_config));
	uint64_t want = sizeof(struct l2c_config), floats;
	uint32_t k = 0;

	floats = V * dim + L * (dim * 2 + dim * dim * 2 + kv * dim * 2 + hid * dim * 3) + dim +
		 (uint64_t)c->seq_len * hs; /* the two rope tables, seq_len x hs/2 each */
	want += (floats + (im->tied ? 0 : V * dim)) * sizeof(float);
	if (im->map_len != want) {
		snprintf(err, err_len, "%s: expected %" PRIu64 " bytes for this header (%s "
			 "classifier), found %zu", path, want, im->tied ? "tied" : "untied",
			 im->map_len);
		return CM_EFORMAT;
	}
	im->t = cm_calloc(3 + 9 * L, sizeof(*im->t));
	if (!im->t)
		return CM_ENOMEM;
#define ADD(nm, r, cl, ptr) do {                                               \
		struct l2c_tensor *t_ = &im->t[k++];                               \
		snprintf(t_->name, sizeof(t_->name), "%s", nm);                    \
		t_->n_dims = (cl) == 1 ? 1 : 2;                                    \
		t_->dims[0] = (cl) == 1 ? (r) : (cl);                              \
		t_->dims[1] = (cl) == 1 ? 1 : (r);                                 \
		t_->data = (ptr);                                                  \
	} while (0)
	ADD("token_embd.weight", V, dim, p);
	p += V * dim;
	/* llama2.c stores each group for all layers together */
	for (uint32_t g = 0; g < 9; g++) {
		for (uint64_t l = 0; l < L; l++) {
			char nm[48];

			snprintf(nm, sizeof(nm), "blk.%" PRIu64 ".%s.weight", l, names[g]);
			ADD(nm, rows[g], cols[g], p);
			p += rows[g] * cols[g];
		}
	}
	ADD("output_norm.weight", dim, 1, p);
	p += dim + (uint64_t)c->seq_len * hs;
	if (!im->tied)
		ADD("output.weight", V, dim, p);
#undef ADD
	im->n_t = k;
	return CM_OK;
}

/* A little-endian cursor over the tokenizer's bytes. */
struct l2c_cur {
	const uint8_t *p;
	size_t left;
};

static int cur_take(struct l2c_cur *c, void *dst, size_t n)
{
	if (c->left < n)
		return -1;
	memcpy(dst, c->p, n);
	c->p += n;
	c->left -= n;
	return 0;
}

/* Reads tokenizer.bin: int32 max length, then per token f32 score, int32
 * length, bytes.  Pieces get SentencePiece's U+2581 for a space. */
static enum cm_status l2c_vocab(struct model_l2c *im, const uint8_t *vb, size_t vlen,
				const char *path, char *err, size_t err_len)
{
	struct l2c_cur cur = { vb, vlen };
	int32_t maxlen, len;
	uint32_t n = (uint32_t)im->c.vocab_size;

	im->tok = cm_calloc(n, sizeof(*im->tok));
	im->score = cm_calloc(n, sizeof(*im->score));
	im->type = cm_calloc(n, sizeof(*im->type));
	if (!im->tok || !im->score || !im->type)
		return CM_ENOMEM;
	if (cur_take(&cur, &maxlen, 4) != 0 || maxlen <= 0 || (uint32_t)maxlen > L2C_MAX_PIECE) {
		snprintf(err, err_len, "%s: expected a llama2.c tokenizer (max piece length "
			 "1..%u first)", path, L2C_MAX_PIECE);
		return CM_EFORMAT;
	}
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *raw;
		char *o;
		size_t w = 0;

		if (cur_take(&cur, &im->score[i], 4) != 0 || cur_take(&cur, &len, 4) != 0 ||
		    len < 0 || len > maxlen || cur.left < (size_t)len) {
			snprintf(err, err_len, "%s: expected %u tokens (the checkpoint's vocab_size), "
				 "found a bad or missing entry at token %u", path, n, i);
			return CM_EFORMAT;
		}
		raw = cur.p;
		cur.p += len;
		cur.left -= (size_t)len;
		o = im->tok[i] = cm_malloc((size_t)len * 3 + 8);
		if (!o)
			return CM_ENOMEM;
		im->n_tok = i + 1;
		if (i == 1 || i == 2) {
			/* llama2.c writes BOS and EOS as "\n<s>\n", "\n</s>\n" */
			snprintf(o, 8, "%s", i == 1 ? "<s>" : "</s>");
			im->type[i] = WK_TOK_T_CONTROL;
			continue;
		}
		for (int32_t b = 0; b < len; b++) {
			if (raw[b] == ' ') {
				memcpy(o + w, "\xe2\x96\x81", 3);
				w += 3;
			} else {
				o[w++] = (char)raw[b];
			}
		}
		o[w] = '\0';
		im->type[i] = i == 0 ? WK_TOK_T_UNKNOWN
			    : (len == 6 && memcmp(raw, "<0x", 3) == 0 && raw[5] == '>')
				      ? WK_TOK_T_BYTE
				      : WK_TOK_T_NORMAL;
	}
	if (cur.left != 0) {
		snprintf(err, err_len, "%s: expected %u tokens (the checkpoint's vocab_size), "
			 "found %zu more bytes", path, n, cur.left);
		return CM_EFORMAT;
	}
	return CM_OK;
}

enum cm_status model_l2c_write(struct model_l2c *im, const char *name, const char *out,
			       char *err, size_t err_len)
{
	const struct l2c_config *c = &im->c;
	struct wk_gguf_writer *w = NULL;
	enum cm_status st = wk_gguf_writer_new(&w);

#define CHK(call) do { if (st == CM_OK) st = (call); } while (0)
	CHK(wk_gguf_writer_add_str(w, "general.architecture", "llama"));
	CHK(wk_gguf_writer_add_str(w, "general.name", name));
	CHK(wk_gguf_writer_add_u32(w, "general.file_type", 0)); /* all F32 */
	CHK(wk_gguf_writer_add_u32(w, "llama.context_length", (uint32_t)c->seq_len));
	CHK(wk_gguf_writer_add_u32(w, "llama.embedding_length", (uint32_t)c->dim));
	CHK(wk_gguf_writer_add_u32(w, "llama.block_count", (uint32_t)c->n_layers));
	CHK(wk_gguf_writer_add_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim));
	CHK(wk_gguf_writer_add_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads));
	CHK(wk_gguf_writer_add_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads));
	CHK(wk_gguf_writer_add_u32(w, "llama.rope.dimension_count",
				   (uint32_t)(c->dim / c->n_heads)));
	/* run.c's constants */
	CHK(wk_gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f));
	CHK(wk_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
	CHK(wk_gguf_writer_add_u32(w, "llama.vocab_size", (uint32_t)c->vocab_size));
	CHK(wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama"));
	CHK(wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)im->tok,
				       NULL, im->n_tok));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.scores", WK_GGUF_F32, im->score, im->n_tok));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", WK_GGUF_I32, im->type,
				   im->n_tok));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2));
	CHK(wk_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 1));
	CHK(wk_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", 0));
	CHK(wk_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", 1));
	for (uint32_t i = 0; i < im->n_t; i++)
		CHK(wk_gguf_writer_add_tensor_fill(w, im->t[i].name, WK_Q_F32, im->t[i].n_dims,
						   im->t[i].dims, l2c_fill, im));
#undef CHK
	if (st != CM_OK)
		snprintf(err, err_len, "building the file failed: %s", cm_status_str(st));
	else
		st = wk_gguf_writer_write_file(w, out, err, err_len);
	wk_gguf_writer_free(w);
	return st;
}

/* general.name: the checkpoint's file name without folders and extension. */
static void l2c_name(const char *path, char *out, size_t cap)
{
	const char *b = strrchr(path, '/');
	const char *dot;

	b = b ? b + 1 : path;
	dot = strrchr(b, '.');
	snprintf(out, cap, "%.*s", (int)(dot && dot > b ? (size_t)(dot - b) : strlen(b)), b);
}

enum cm_status model_l2c_parse(const uint8_t *ckpt, size_t ckpt_len, const char *ckpt_path,
			       const uint8_t *vocab, size_t vocab_len, const char *vocab_path,
			       struct model_l2c *im, char *err, size_t err_len)
{
	enum cm_status st;

	memset(im, 0, sizeof(*im));
	im->map = ckpt;
	im->map_len = ckpt_len;
	st = l2c_header(im, ckpt_path, err, err_len);
	if (st == CM_OK)
		st = l2c_tensors(im, ckpt_path, err, err_len);
	if (st == CM_OK)
		st = l2c_vocab(im, vocab, vocab_len, vocab_path, err, err_len);
	return st;
}

void model_l2c_deinit(struct model_l2c *im)
{
	for (uint32_t i = 0; i < im->n_tok; i++)
		cm_free(im->tok[i]);
	cm_free(im->tok);
	cm_free(im->score);
	cm_free(im->type);
	cm_free(im->t);
	memset(im, 0, sizeof(*im));
}

/* The whole of a small file (the tokenizer), malloc'd. */
static enum cm_status read_small(const char *path, uint8_t **out, size_t *len, char *err,
				 size_t err_len)
{
	FILE *f = fopen(path, "rb");
	long n;

	*out = NULL;
	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		if (f)
			fclose(f);
		return CM_EIO;
	}
	*out = cm_malloc((size_t)n + 1);
	if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n) {
		snprintf(err, err_len, "%s: could not be read", path);
		fclose(f);
		cm_free(*out);
		*out = NULL;
		return CM_EIO;
	}
	fclose(f);
	*len = (size_t)n;
	return CM_OK;
}

int model_cmd_import(int argc, char **argv)
{
	const char *ckpt = NULL, *vocab = NULL, *out = NULL;
	struct model_l2c im;
	char err[ERR_LEN] = "", name[128];
	enum cm_status st = CM_EINVAL;
	uint8_t *vb = NULL;
	const uint8_t *map = NULL;
	size_t vlen = 0, map_len = 0;
	struct stat sb;
	int fd = -1;

	memset(&im, 0, sizeof(im));
	if (argc < 1 || strcmp(argv[0], "llama2c") != 0) {
		fprintf(stderr, "sluice-model import: expected the format 'llama2c', found '%s'\n",
			argc < 1 ? "" : argv[0]);
		return 2;
	}
	for (int a = 1; a < argc; a++) {
		const char *val = a + 1 < argc ? argv[a + 1] : NULL;

		if ((strcmp(argv[a], "--vocab") == 0 || strcmp(argv[a], "-o") == 0) && val) {
			*(argv[a][1] == 'o' ? &out : &vocab) = val;
			a++;
		} else if (argv[a][0] != '-' && !ckpt) {
			ckpt = argv[a];
		} else {
			fprintf(stderr, "sluice-model import: unexpected argument '%s'\n", argv[a]);
			return 2;
		}
	}
	if (!ckpt || !vocab || !out) {
		fprintf(stderr, "sluice-model import llama2c: expected CHECKPOINT --vocab "
			"TOKENIZER -o OUT.gguf\n");
		return 2;
	}
	fd = open(ckpt, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0) {
		snprintf(err, sizeof(err), "%s: %s", ckpt, strerror(errno));
		st = CM_EIO;
		goto out;
	}
	map_len = (size_t)sb.st_size;
	map = map_len ? mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	if (map == MAP_FAILED) {
		map = NULL;
		snprintf(err, sizeof(err), "%s: %s", ckpt, strerror(errno));
		st = CM_EIO;
		goto out;
	}
	st = read_small(vocab, &vb, &vlen, err, sizeof(err));
	if (st == CM_OK)
		st = model_l2c_parse(map, map_len, ckpt, vb, vlen, vocab, &im, err, sizeof(err));
	l2c_name(ckpt, name, sizeof(name));
	if (st == CM_OK)
		st = model_l2c_write(&im, name, out, err, sizeof(err));
out:
	if (st != CM_OK)
		fprintf(stderr, "sluice-model import: %s\n", err[0] ? err : cm_status_str(st));
	else
		printf("wrote %s: llama, %u layers, dim %d, vocab %d, context %d, %s classifier\n",
		       out, (unsigned)im.c.n_layers, im.c.dim, im.c.vocab_size, im.c.seq_len,
		       im.tied ? "tied" : "untied");
	if (map)
		munmap((void *)map, map_len);
	if (fd >= 0)
		close(fd);
	cm_free(vb);
	model_l2c_deinit(&im);
	return st == CM_OK ? 0 : 1;
}
