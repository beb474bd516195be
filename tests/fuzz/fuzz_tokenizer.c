/*
 * fuzz_tokenizer.c - libFuzzer target for the tokenizer (worker/text/vocab.c, encode.c, detok.c).
 *
 * Input: byte 0 selects the encode flags (bits 0..2) and the vocabulary
 * (bits 3..7, modulo their number), the rest is the text, which is
 * encoded and then decoded by the streaming detokenizer.  Checked: no crash, the decoded
 * text is always valid UTF-8, and for vocabularies where it must hold
 * (SentencePiece with byte fallback, byte-level BPE; when every byte of
 * the input has a token, which real vocabularies do not always provide)
 * decode(encode(x)) == x for valid UTF-8 x encoded without special tokens
 * (for SPM, x must not contain U+2581, which SPM decodes as a space).
 *
 * Vocabularies: the GGUF files named ggml-vocab-*.gguf in the directory
 * $SLUICE_FUZZ_TOKENIZER_DIR (e.g. ../shared/testdata/tokenizer), plus
 * three vocabularies generated here (SPM, WordPiece and byte-level BPE),
 * so the target is useful without any files.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/utf8.h"
#include "worker/model/gguf.h"
#include "worker/text/tokenizer.h"

#define MAX_VOCABS 16

struct fz_vocab {
	struct wk_tok *tok;
	int round_trip;       /* decode(encode(x)) == x must hold ... */
	uint8_t covered[256]; /* ... when every byte of x has a token */
};

static struct fz_vocab vocabs[MAX_VOCABS];
static size_t n_vocabs;

static uint32_t byte_cp(int b)
{
	if (b <= 0x20)
		return 256u + (uint32_t)b;
	if (b >= 0x7F && b <= 0xA0)
		return 256u + 33u + (uint32_t)(b - 0x7F);
	if (b == 0xAD)
		return 256u + 67u;
	return (uint32_t)b;
}

static void add_vocab(struct wk_tok *tok, int round_trip)
{
	struct fz_vocab *v;

	if (n_vocabs == MAX_VOCABS) {
		wk_tok_free(tok);
		return;
	}
	v = &vocabs[n_vocabs++];
	v->tok = tok;
	v->round_trip = round_trip;
	for (int b = 0; b < 256; b++) {
		char s[8] = { 0 };
		uint8_t u[4];

		if (strcmp(wk_tok_model_name(tok), "spm") == 0) {
			snprintf(s, sizeof(s), "<0x%02X>", b);
		} else {
			int k = cm_utf8_encode(byte_cp(b), u);

			memcpy(s, u, (size_t)k);
		}
		v->covered[b] = wk_tok_lookup(tok, s) >= 0;
	}
}

static int all_covered(const struct fz_vocab *v, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!v->covered[(uint8_t)s[i]])
			return 0;
	return 1;
}

static void gen_spm(void)
{
	static char bytes[256][8];
	static const char *pieces[] = {
		"\xE2\x96\x81", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "in", "er", "an",
		("\xE2\x96\x81" "a"), "on", "re", "\xE2\x96\x81\xE2\x96\x81", "\xE4\xB8\xAD",
		"<|im_end|>", "<|im_start|>",
	};
	const char *toks[3 + 256 + 14];
	float scores[3 + 256 + 14];
	int32_t types[3 + 256 + 14];
	struct wk_tok_vocab v;
	struct wk_tok *tok;
	size_t n = 0;
	char err[256];

	toks[n] = "<unk>"; types[n] = WK_TOK_T_UNKNOWN; scores[n++] = 0;
	toks[n] = "<s>"; types[n] = WK_TOK_T_CONTROL; scores[n++] = 0;
	toks[n] = "</s>"; types[n] = WK_TOK_T_CONTROL; scores[n++] = 0;
	for (int b = 0; b < 256; b++) {
		snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
		toks[n] = bytes[b]; types[n] = WK_TOK_T_BYTE; scores[n++] = 0;
	}
	for (size_t i = 0; i < 14; i++) {
		toks[n] = pieces[i];
		types[n] = i >= 12 ? WK_TOK_T_CONTROL : WK_TOK_T_NORMAL;
		scores[n++] = -(float)i;
	}
	wk_tok_vocab_init(&v);
	v.model = "llama";
	v.n_tokens = n;
	v.tokens = toks;
	v.scores = scores;
	v.types = types;
	if (wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)) == CM_OK)
		add_vocab(tok, 1);
}

static void gen_bpe(const char *pre)
{
	static char texts[256][4];
	const char *toks[256 + 4];
	const char *merges[] = { "\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n" };
	int32_t types[256 + 4];
	struct wk_tok_vocab v;
	struct wk_tok *tok;
	char err[256];

	for (int b = 0; b < 256; b++) {
		uint32_t cp = byte_cp(b);

		memset(texts[b], 0, sizeof(texts[b]));
		if (cp < 0x80) {
			texts[b][0] = (char)cp;
		} else {
			texts[b][0] = (char)(0xC0 | (cp >> 6));
			texts[b][1] = (char)(0x80 | (cp & 0x3F));
		}
		toks[b] = texts[b];
		types[b] = WK_TOK_T_NORMAL;
	}
	toks[256] = "\xC4\xA0t";
	toks[257] = "he";
	toks[258] = "\xC4\xA0the";
	toks[259] = "<|endoftext|>";
	types[256] = types[257] = types[258] = WK_TOK_T_NORMAL;
	types[259] = WK_TOK_T_CONTROL;
	wk_tok_vocab_init(&v);
	v.model = "gpt2";
	v.pre = pre;
	v.n_tokens = 260;
	v.tokens = toks;
	v.types = types;
	v.n_merges = 4;
	v.merges = merges;
	if (wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)) == CM_OK)
		add_vocab(tok, 1);
}

/* WordPiece: [UNK] [CLS] [SEP], every printable ASCII letter as a word
 * start and a continuation, a few words (no round trip: it lowercases) */
static void gen_wpm(void)
{
	static char texts[2][95][8];
	const char *toks[3 + 2 * 95 + 3];
	int32_t types[3 + 2 * 95 + 3];
	struct wk_tok_vocab v;
	struct wk_tok *tok;
	char err[256];
	size_t n = 0;

	toks[n] = "[UNK]"; types[n++] = WK_TOK_T_UNKNOWN;
	toks[n] = "[CLS]"; types[n++] = WK_TOK_T_CONTROL;
	toks[n] = "[SEP]"; types[n++] = WK_TOK_T_CONTROL;
	for (int c = 0x20; c < 0x7F; c++) {
		snprintf(texts[0][c - 0x20], 8, "\xe2\x96\x81%c", c);
		snprintf(texts[1][c - 0x20], 8, "%c", c);
		toks[n] = texts[0][c - 0x20]; types[n++] = WK_TOK_T_NORMAL;
		toks[n] = texts[1][c - 0x20]; types[n++] = WK_TOK_T_NORMAL;
	}
	toks[n] = "\xe2\x96\x81hello"; types[n++] = WK_TOK_T_NORMAL;
	toks[n] = "ing"; types[n++] = WK_TOK_T_NORMAL;
	toks[n] = "\xe2\x96\x81\xe4\xb8\xad"; types[n++] = WK_TOK_T_NORMAL;
	wk_tok_vocab_init(&v);
	v.model = "bert";
	v.n_tokens = n;
	v.tokens = toks;
	v.types = types;
	v.unk = 0;
	v.bos = 1;
	v.eos = 2;
	if (wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)) == CM_OK)
		add_vocab(tok, 0);
}

static void load_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		char path[1024], err[256];
		struct wk_gguf *g = NULL;
		struct wk_tok *tok = NULL;

		if (strncmp(de->d_name, "ggml-vocab-", 11) != 0 || l < 5 ||
		    strcmp(de->d_name + l - 5, ".gguf") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (wk_gguf_open(path, &g, err, sizeof(err)) != CM_OK)
			continue;
		if (wk_tok_new_from_gguf(g, &tok, err, sizeof(err)) == CM_OK)
			/* Phi-3's special tokens strip the spaces after them */
			add_vocab(tok, strstr(de->d_name, "phi-3") == NULL);
		wk_gguf_close(g);
	}
	closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("SLUICE_FUZZ_TOKENIZER_DIR");

	(void)argc;
	(void)argv;
	gen_spm();
	gen_bpe("gpt-2");
	gen_bpe("llama3");
	gen_bpe("deepseek-llm");
	gen_bpe("deepseek-coder");
	gen_bpe("qwen2");
	gen_bpe("falcon");
	gen_bpe("default");
	if (dir)
		load_dir(dir);
	gen_wpm(); /* last: the indices of the others stay as the corpus knows them */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int32_t ids[1 << 16];
	unsigned sel, flags = 0;
	const char *text;
	size_t len;
	int valid;

	if (size == 0 || n_vocabs == 0)
		return 0;
	sel = data[0];
	text = (const char *)data + 1;
	len = size - 1;
	if (sel & 1)
		flags |= WK_TOK_PARSE_SPECIAL;
	if (sel & 2)
		flags |= WK_TOK_ADD_BOS | WK_TOK_ADD_EOS;
	valid = cm_utf8_valid(text, len);
	/* one vocabulary per input (bits 3..7 of byte 0): more executions */
	for (size_t v = (sel >> 3) % n_vocabs, once = 0; !once; once = 1) {
		const struct wk_tok *tok = vocabs[v].tok;
		struct wk_detok d;
		struct cm_buf out;
		size_t n = 0;
		/* a small cap sometimes, to walk the CM_ELIMIT path */
		size_t cap = (sel & 4) ? (len / 4) : sizeof(ids) / sizeof(ids[0]);
		enum cm_status st = wk_tok_encode(tok, text, len, flags, ids, cap, &n);

		if (st == CM_ELIMIT) {
			if (n <= cap)
				abort();
			n = cap;
		} else if (st != CM_OK) {
			abort();
		}
		cm_buf_init(&out, 16 * len + 64);
		wk_detok_init(&d, tok, WK_DETOK_STRIP_DUMMY_PREFIX);
		for (size_t i = 0; i < n; i++) {
			if (ids[i] < 0 || (size_t)ids[i] >= wk_tok_n_vocab(tok))
				abort();
			if (wk_detok_push(&d, ids[i], &out) != CM_OK)
				abort();
		}
		if (wk_detok_flush(&d, &out) != CM_OK)
			abort();
		if (!cm_utf8_valid(cm_buf_data(&out), cm_buf_len(&out)))
			abort();
		/* SPM cannot tell a typed U+2581 from an escaped space */
		if (valid && vocabs[v].round_trip && st == CM_OK && flags == 0 &&
		    !(strcmp(wk_tok_model_name(tok), "spm") == 0 &&
		      memmem(text, len, "\xE2\x96\x81", 3) != NULL) &&
		    all_covered(&vocabs[v], text, len) &&
		    (cm_buf_len(&out) != len || memcmp(cm_buf_data(&out), text, len) != 0)) {
			fprintf(stderr, "round trip failed for vocabulary %zu (%s/%s)\n", v,
				wk_tok_model_name(tok), wk_tok_pre_name(tok));
			abort();
		}
		cm_buf_deinit(&out);
	}
	return 0;
}
