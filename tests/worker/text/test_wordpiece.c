/*
 * test_wordpiece.c - the WordPiece tokenizer (tokenizer.ggml.model "bert",
 * worker/text/encode.c) and the Unicode lookups it needs
 * (worker/text/unicode.h: NFD first code point, lowercase, controls).
 *
 * A WordPiece vocabulary written here (word-initial pieces prefixed with
 * U+2581 and continuations bare, as llama.cpp's converter writes BERT's
 * "##" pieces; [PAD] [UNK] [CLS] [SEP] [MASK] as control tokens) is saved
 * as a vocabulary-only GGUF file and loaded through the worker's GGUF path.
 * Each test string's ids must equal llama.cpp's on that same file
 * (tests/worker/model/llamacpp/wordpiece-ids.txt; its README says how they
 * were recorded; SLUICE_WPM_KEEP=PATH keeps a copy of the file).  Then
 * [CLS] / [SEP] around an encoding with WK_TOK_ADD_BOS/EOS, decoding, and
 * what the lookups return for accents, Hangul, case and controls.
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

#include "common/buf.h"
#include "tools/gguf_write.h"
#include "worker/model/gguf.h"
#include "worker/text/tokenizer.h"
#include "worker/text/unicode.h"

#define W "\xe2\x96\x81" /* U+2581: the start of a word */

static const char *const vocab[] = {
	"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
	W "hello", W "world", W "the", W "un", "aff", "able", W "play", "ing", "s", "ed",
	W "cafe", W "fuhrer", W "naive", W "don", W "'", W "t", W "state", W "-", W "of",
	W "art", W ",", W ".", W "!", W "?", W "(", W ")", W "1", W "12", "3", W "a", W "b",
	W "c", W "x", W "y", "a", "b", "c", "x", "y", W "中", W "国", W "人", W "$", W "+",
	W "über", W "ü", W "ß", "ß", W "αβ", W "γ", W "з", "дра", "вствуй", W "з" "дравствуй",
	W "e", "e", W "i", W "n", "n", W "o", "o", W "u", "u", W "r", "r", W "h", "h", W "l", "l",
	W "ll", "ll", W "w", "w", W "d", "d", W "p", "p", W "g", "g", W "s", W "f", "f", W "v",
	"v", W "k", "k", W "m", "m", W "\xe1\x84\x80", W "#", W "@", W "中国",
};
#define N_VOCAB (sizeof(vocab) / sizeof(vocab[0]))

/* the test strings (as llama.cpp's fixture lists them, in order) */
static const char *const cases[] = {
	"Hello world",
	" Hello, world!",
	"unaffable playing",
	"Café Führer",
	"naïve NAÏVE",
	"don't",
	"state-of-the-art",
	"中国人",
	"a\tb\nc  x",
	"x\x01y\x7f",
	"123 12 1",
	"$1+2",
	"Über straße ÜBER",
	"αβγ Здравствуй",
	"\xea\xb0\x80",
	"🦙 llama",
	"supercalifragilistic",
	"(hello)?",
	"#@",
	"\xef\xbc\xa1",
	"played plays",
	"",
	"   ",
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static char tmpdir[256];
static struct wk_tok *tok;

static int setup(void **state)
{
	struct wk_gguf_writer *w = NULL;
	struct wk_gguf *g = NULL;
	int32_t types[N_VOCAB];
	char path[512], err[256];
	const char *keep = getenv("SLUICE_WPM_KEEP");

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-wpm-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	for (size_t i = 0; i < N_VOCAB; i++)
		types[i] = i < 5 ? WK_TOK_T_CONTROL : WK_TOK_T_NORMAL;
	types[1] = WK_TOK_T_UNKNOWN;
	snprintf(path, sizeof(path), "%s/wpm.gguf", tmpdir);
	if (wk_gguf_writer_new(&w) != CM_OK ||
	    wk_gguf_writer_add_str(w, "general.architecture", "bert") != CM_OK ||
	    /* the hyperparameters a vocabulary-only llama.cpp load reads */
	    wk_gguf_writer_add_u32(w, "bert.block_count", 1) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "bert.context_length", 512) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "bert.embedding_length", 32) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "bert.feed_forward_length", 64) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "bert.attention.head_count", 2) != CM_OK ||
	    wk_gguf_writer_add_f32(w, "bert.attention.layer_norm_epsilon", 1e-12f) != CM_OK ||
	    wk_gguf_writer_add_bool(w, "bert.attention.causal", 0) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2) != CM_OK ||
	    wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "bert") != CM_OK ||
	    wk_gguf_writer_add_str(w, "tokenizer.ggml.pre", "default") != CM_OK ||
	    wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", vocab, NULL, N_VOCAB) != CM_OK ||
	    wk_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", WK_GGUF_I32, types, N_VOCAB) !=
		    CM_OK ||
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 1) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.seperator_token_id", 3) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 0) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.cls_token_id", 2) != CM_OK ||
	    /* llama.cpp takes [CLS] from the BOS key (its default is BERT's 101) */
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 2) != CM_OK ||
	    wk_gguf_writer_add_u32(w, "tokenizer.ggml.mask_token_id", 4) != CM_OK ||
	    wk_gguf_writer_write_file(w, path, err, sizeof(err)) != CM_OK)
		return -1;
	wk_gguf_writer_free(w);
	if (keep) {
		char cmd[1200];

		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, keep);
		if (system(cmd) != 0)
			return -1;
	}
	if (wk_gguf_open(path, &g, err, sizeof(err)) != CM_OK ||
	    wk_tok_new_from_gguf(g, &tok, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "wordpiece vocabulary: %s\n", err);
		return -1;
	}
	wk_gguf_close(g);
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	wk_tok_free(tok);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static size_t encode(const char *s, unsigned flags, int32_t *out, size_t cap)
{
	size_t n = 0;

	assert_int_equal(wk_tok_encode(tok, s, strlen(s), flags, out, cap, &n), CM_OK);
	return n;
}

/* every case's ids equal llama.cpp's on the same vocabulary file */
static void test_ids_equal_llamacpp(void **state)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char path[1024], line[4096];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/tests/worker/model/llamacpp/wordpiece-ids.txt",
		 src ? src : ".");
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	for (size_t c = 0; c < N_CASES; c++) {
		int32_t ids[256];
		size_t n = encode(cases[c], 0, ids, 256), k = 0;
		char *p = line, *end;

		if (!fgets(line, sizeof(line), f))
			fail_msg("%s: no line for case %zu", path, c);
		for (long v = strtol(p, &end, 10); end != p; v = strtol(p, &end, 10)) {
			if (k >= n || ids[k] != v)
				fail_msg("case %zu (\"%s\"): id %zu is %d, llama.cpp's is %ld", c, cases[c],
					 k, k < n ? ids[k] : -1, v);
			k++;
			p = end;
		}
		if (k != n)
			fail_msg("case %zu (\"%s\"): %zu ids, llama.cpp has %zu", c, cases[c], n, k);
	}
	fclose(f);
}

/* [CLS] ... [SEP] when asked; an unknown word is one [UNK]; decoding */
static void test_specials_and_decode(void **state)
{
	int32_t ids[64];
	size_t n = encode("hello unaffable zzz", WK_TOK_ADD_BOS | WK_TOK_ADD_EOS, ids, 64);
	struct cm_buf b;
	struct wk_detok d;
	size_t len;
	char *text;

	(void)state;
	assert_int_equal(n, 7);
	assert_int_equal(ids[0], 2);     /* [CLS] */
	assert_int_equal(ids[1], 5);     /* ▁hello */
	assert_int_equal(ids[2], 8);     /* ▁un */
	assert_int_equal(ids[3], 9);     /* aff */
	assert_int_equal(ids[4], 10);    /* able */
	assert_int_equal(ids[5], 1);     /* zzz: no piece covers it */
	assert_int_equal(ids[6], 3);     /* [SEP] */
	assert_int_equal(wk_tok_add_bos(tok), 1);
	cm_buf_init(&b, 1 << 16);
	wk_detok_init(&d, tok, 0);
	for (size_t i = 1; i < 5; i++)
		assert_int_equal(wk_detok_push(&d, ids[i], &b), CM_OK);
	assert_int_equal(wk_detok_flush(&d, &b), CM_OK);
	text = cm_buf_take(&b, &len);
	assert_string_equal(text, " hello unaffable");
	free(text);
}

static void test_unicode_lookups(void **state)
{
	(void)state;
	assert_int_equal(wk_uc_nfd_first(0xE9), 'e');      /* é */
	assert_int_equal(wk_uc_nfd_first(0x1E69), 's');    /* ṩ: two marks */
	assert_int_equal(wk_uc_nfd_first(0xAC00), 0x1100); /* 가 -> ᄀ */
	assert_int_equal(wk_uc_nfd_first(0xD7A3), 0x1112); /* 힣 -> ᄒ */
	assert_int_equal(wk_uc_nfd_first(0x00DF), 0x00DF); /* ß has none */
	assert_int_equal(wk_uc_nfd_first('A'), 'A');
	assert_int_equal(wk_uc_tolower('A'), 'a');
	assert_int_equal(wk_uc_tolower(0xC9), 0xE9);       /* É */
	assert_int_equal(wk_uc_tolower(0x0417), 0x0437);   /* З */
	assert_int_equal(wk_uc_tolower(0xFF21), 0xFF41);   /* fullwidth A */
	assert_int_equal(wk_uc_tolower(0x4E2D), 0x4E2D);
	assert_true(wk_uc_is_control(0x01));
	assert_true(wk_uc_is_control(0x7F));
	assert_true(wk_uc_is_control(0x200B));  /* zero width space: Cf */
	assert_true(wk_uc_is_control(0xE000));  /* private use */
	assert_false(wk_uc_is_control(0x0378)); /* unassigned (Cn) */
	assert_false(wk_uc_is_control('a'));
	assert_false(wk_uc_is_control(0x4E2D));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids_equal_llamacpp),
		cmocka_unit_test(test_specials_and_decode),
		cmocka_unit_test(test_unicode_lookups),
	};

	return cmocka_run_group_tests_name("worker/wordpiece", tests, setup, teardown);
}
