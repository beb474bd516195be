/*
 * synth_vocab.c - `sluice-model synth`'s vocabulary (control tokens, the
 * 256 byte tokens, then SentencePiece-style word pieces up to the size
 * asked for) and the chat templates it can write, each with the control
 * tokens its markers need.  Pure data and functions; see synth_vocab.h.
 */
#include "tools/synth_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

/* ==== synth: vocabulary ============================================= */



static const char *const ctl_chatml[] = { "<|im_start|>", "<|im_end|>", NULL };
static const char *const ctl_llama3[] = { "<|begin_of_text|>", "<|start_header_id|>",
					  "<|end_header_id|>", "<|eot_id|>", NULL };
static const char *const ctl_phi3[] = { "<|system|>", "<|user|>", "<|assistant|>",
					"<|end|>", "<|endoftext|>", NULL };
static const char *const ctl_gemma[] = { "<start_of_turn>", "<end_of_turn>", NULL };
static const char *const ctl_phi4[] = { "<|im_start|>", "<|im_sep|>", "<|im_end|>", NULL };
static const char *const ctl_granite[] = { "<|start_of_role|>", "<|end_of_role|>",
					   "<|end_of_text|>", NULL };
static const char *const ctl_none[] = { NULL };
/* Qwen3's added tokens: whole tokens in the text, not control tokens */
static const char *const added_qwen3[] = { "<think>", "</think>", "<tool_call>", "</tool_call>",
					   NULL };

/* Qwen3's generation prompt: the answer after "<think>\n" (thinking
 * models) or the model opens thinking itself (hybrid); both write the
 * empty block for enable_thinking=false. */
#define QWEN3_TURNS \
	"{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + " \
	"message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}"
#define QWEN3_NO_THINK \
	"{%- if enable_thinking is defined and enable_thinking is false %}" \
	"{{- '<think>\\n\\n</think>\\n\\n' }}"

static const struct template_def templates[] = {
	{ "chatml",
	  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
	  "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
	  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
	  ctl_chatml, "<|im_end|>", 0, NULL },
	{ "llama3",
	  "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + "
	  "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
	  "'<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
	  "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
	  ctl_llama3, "<|eot_id|>", 1, NULL },
	{ "llama2",
	  "{% if messages[0]['role'] == 'system' %}{% set sys = '<<SYS>>\\n' + "
	  "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% set rest = messages[1:] %}"
	  "{% else %}{% set sys = '' %}{% set rest = messages %}{% endif %}"
	  "{% for message in rest %}{% if message['role'] == 'user' %}"
	  "{% if loop.index0 == 0 %}{{ bos_token + '[INST] ' + sys + message['content'] | trim "
	  "+ ' [/INST]' }}{% else %}{{ bos_token + '[INST] ' + message['content'] | trim + "
	  "' [/INST]' }}{% endif %}{% elif message['role'] == 'assistant' %}"
	  "{{ ' ' + message['content'] | trim + ' ' + eos_token }}{% endif %}{% endfor %}",
	  ctl_none, NULL, 0, NULL },
	{ "mistral",
	  "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
	  "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
	  "'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
	  ctl_none, NULL, 0, NULL },
	{ "zephyr",
	  "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + "
	  "message['content'] + eos_token + '\\n' }}{% endfor %}"
	  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
	  ctl_none, NULL, 0, NULL },
	{ "phi3",
	  "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + "
	  "message['content'] + '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
	  "{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}",
	  ctl_phi3, "<|end|>", 0, NULL },
	{ "gemma",
	  "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}"
	  "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
	  "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
	  "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
	  "{{ '<start_of_turn>model\\n' }}{% endif %}",
	  ctl_gemma, "<end_of_turn>", 0, NULL },
	{ "phi4",
	  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '<|im_sep|>' + "
	  "message['content'] + '<|im_end|>' }}{% endfor %}{% if add_generation_prompt %}"
	  "{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}",
	  ctl_phi4, "<|im_end|>", 0, NULL },
	{ "granite",
	  "{%- for message in messages %}{{- '<|start_of_role|>' + message['role'] + "
	  "'<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}"
	  "{%- if loop.last and add_generation_prompt %}"
	  "{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}{%- endfor %}",
	  ctl_granite, "<|end_of_text|>", 0, NULL },
	{ "qwen3",
	  QWEN3_TURNS "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
	  QWEN3_NO_THINK "{%- endif %}{%- endif %}",
	  ctl_chatml, "<|im_end|>", 0, added_qwen3 },
	{ "qwen3-thinking",
	  QWEN3_TURNS "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
	  QWEN3_NO_THINK "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}",
	  ctl_chatml, "<|im_end|>", 0, added_qwen3 },
	{ "none", NULL, ctl_none, NULL, 0, NULL },
};

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_BYTE = 6 };

/* The generated vocabulary: pieces in one pool, unique (hash set). */


uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	while (n--) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

static int vocab_init(struct vocab *v, uint32_t cap)
{
	uint32_t slots = 16;

	while (slots < 2 * cap)
		slots <<= 1;
	v->n = 0;
	v->cap = cap;
	v->tok = cm_calloc(cap, sizeof(*v->tok));
	v->len = cm_calloc(cap, sizeof(*v->len));
	v->score = cm_calloc(cap, sizeof(*v->score));
	v->type = cm_calloc(cap, sizeof(*v->type));
	v->set = cm_calloc(slots, sizeof(*v->set));
	v->set_mask = slots - 1;
	return v->tok && v->len && v->score && v->type && v->set ? 0 : -1;
}

void vocab_deinit(struct vocab *v)
{
	for (uint32_t i = 0; i < v->n; i++)
		cm_free(v->tok[i]);
	cm_free(v->tok);
	cm_free(v->len);
	cm_free(v->score);
	cm_free(v->type);
	cm_free(v->set);
}

/* Adds a token unless present or full; returns its id, -1 when skipped. */
static int64_t vocab_add(struct vocab *v, const char *s, size_t n, int32_t type)
{
	uint32_t i = (uint32_t)hash_bytes(s, n) & v->set_mask;

	while (v->set[i]) {
		uint32_t e = v->set[i] - 1;

		if (v->len[e] == n && memcmp(v->tok[e], s, n) == 0)
			return -1;
		i = (i + 1) & v->set_mask;
	}
	if (v->n == v->cap)
		return -1;
	v->tok[v->n] = cm_strndup(s, n);
	if (!v->tok[v->n])
		return -1;
	v->len[v->n] = n;
	v->type[v->n] = type;
	v->score[v->n] = 0.0f;
	v->set[i] = v->n + 1;
	return v->n++;
}

#define SPM_SPACE "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK */

static void add_piece(struct vocab *v, uint32_t limit, const char *prefix, const char *s)
{
	char buf[64];
	int n;

	if (v->n >= limit)
		return;
	n = snprintf(buf, sizeof(buf), "%s%s", prefix, s);
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)vocab_add(v, buf, (size_t)n, TT_NORMAL);
}

/*
 * Pieces in rough order of usefulness: single characters, "▁"+character,
 * common words, common letter pairs and triples, then every lower-case
 * pair, triple and quadruple (with and without "▁") until `limit` tokens.
 * Every piece can be built by merging two shorter pieces.
 */
static void vocab_pieces(struct vocab *v, uint32_t limit)
{
	static const char *const words[] = {
		"the", "and", "of", "to", "in", "is", "it", "that", "for", "was", "on",
		"are", "as", "with", "he", "she", "they", "be", "at", "one", "have",
		"this", "from", "or", "had", "by", "not", "but", "what", "all", "were",
		"we", "when", "your", "can", "said", "there", "use", "an", "each",
		"which", "do", "how", "their", "if", "will", "up", "other", "about",
		"out", "many", "then", "them", "these", "so", "some", "her", "would",
		"make", "like", "him", "into", "time", "has", "look", "two", "more",
		"write", "go", "see", "number", "no", "way", "could", "people", "my",
		"than", "first", "water", "been", "call", "who", "its", "now", "find",
		"long", "down", "day", "did", "get", "come", "made", "may", "part",
		"hello", "world", "you", "I", "a",
	};
	static const char *const grams[] = {
		"th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
		"or", "te", "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng",
		"se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri",
		"ro", "ic", "ne", "ea", "ra", "ce", "the", "ing", "and", "ion", "tio",
		"ent", "ati", "for", "her", "ter", "hat", "tha", "ere", "ate", "his",
		"con", "res", "ver", "all", "ons", "nce", "men", "ith", "ted", "ers",
		"pro", "thi", "wit", "are", "ess", "not", "ive", "was", "ect", "rea",
	};
	char s[8];
	size_t i;

	for (int ch = 0x21; ch < 0x7f; ch++) {
		s[0] = (char)ch;
		s[1] = '\0';
		add_piece(v, limit, "", s);
	}
	if (v->n < limit)
		(void)vocab_add(v, SPM_SPACE, strlen(SPM_SPACE), TT_NORMAL);
	for (int ch = 0x21; ch < 0x7f; ch++) {
		s[0] = (char)ch;
		s[1] = '\0';
		add_piece(v, limit, SPM_SPACE, s);
	}
	for (i = 0; i < sizeof(grams) / sizeof(grams[0]); i++)
		add_piece(v, limit, "", grams[i]);
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		/* "▁th" before "▁the" keeps every word reachable by merges */
		if (strlen(words[i]) > 2) {
			snprintf(s, sizeof(s), "%.2s", words[i]);
			add_piece(v, limit, SPM_SPACE, s);
		}
		add_piece(v, limit, SPM_SPACE, words[i]);
	}
	for (int len = 2; len <= 4 && v->n < limit; len++) {
		uint32_t total = 1;

		for (int k = 0; k < len; k++)
			total *= 26;
		for (uint32_t c = 0; c < total && v->n < limit; c++) {
			uint32_t x = c;

			for (int k = len - 1; k >= 0; k--) {
				s[k] = (char)('a' + x % 26);
				x /= 26;
			}
			s[len] = '\0';
			add_piece(v, limit, "", s);
			add_piece(v, limit, SPM_SPACE, s);
		}
	}
	/* still short (huge --vocab): numbered filler pieces */
	for (uint32_t k = 0; v->n < limit; k++) {
		snprintf(s, sizeof(s), "%u", k);
		add_piece(v, limit, "#", s);
	}
}

/*
 * Layout: <unk> <s> </s>, the 256 byte tokens, pieces (scores descending),
 * then the template's control tokens at the end (as real models do).
 */
int build_vocab(struct vocab *v, uint32_t n_vocab, const struct template_def *td,
		uint32_t *bos, uint32_t *eos, int64_t *eot)
{
	uint32_t n_ctl = 0, n_added = 0, first_piece;
	char b[8];

	while (td->controls[n_ctl])
		n_ctl++;
	while (td->added && td->added[n_added])
		n_added++;
	if (vocab_init(v, n_vocab) != 0)
		return -1;
	(void)vocab_add(v, "<unk>", 5, TT_UNKNOWN);
	(void)vocab_add(v, "<s>", 3, TT_CONTROL);
	(void)vocab_add(v, "</s>", 4, TT_CONTROL);
	for (int i = 0; i < 256; i++) {
		snprintf(b, sizeof(b), "<0x%02X>", i);
		(void)vocab_add(v, b, 6, TT_BYTE);
	}
	first_piece = v->n;
	vocab_pieces(v, n_vocab - n_ctl - n_added);
	for (uint32_t i = first_piece; i < v->n; i++)
		v->score[i] = -(float)(i - first_piece);
	*bos = 1;
	*eos = 2;
	*eot = -1;
	for (uint32_t i = 0; i < n_ctl; i++) {
		int64_t id = vocab_add(v, td->controls[i], strlen(td->controls[i]), TT_CONTROL);

		if (id < 0)
			return -1;
		if (i == 0 && td->bos_is_first_control)
			*bos = (uint32_t)id;
		if (td->eot && strcmp(td->eot, td->controls[i]) == 0)
			*eot = id;
	}
	for (uint32_t i = 0; i < n_added; i++)
		if (vocab_add(v, td->added[i], strlen(td->added[i]), TT_USER) < 0)
			return -1;
	return v->n == n_vocab ? 0 : -1;
}

int build_vocab_wpm(struct vocab *v, uint32_t n_vocab)
{
	static const char *const special[] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]" };

	if (vocab_init(v, n_vocab) != 0)
		return -1;
	for (int i = 0; i < 5; i++)
		(void)vocab_add(v, special[i], strlen(special[i]), i == 1 ? TT_UNKNOWN : TT_CONTROL);
	vocab_pieces(v, n_vocab);
	return v->n == n_vocab ? 0 : -1;
}

/* ==== synth: weights ================================================ */


const struct template_def *synth_template(const char *name)
{
	if (!name)
		return &templates[0];
	for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++)
		if (strcmp(name, templates[i].name) == 0)
			return &templates[i];
	return NULL;
}
