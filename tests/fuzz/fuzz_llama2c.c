/*
 * fuzz_llama2c.c - libFuzzer target for `sluice-model import llama2c`
 * (tools/model_import.c): the checkpoint header and layout checks and the
 * tokenizer reader, then the GGUF writer on what they accept.
 *
 * Input: a little-endian u32 n, then n bytes of checkpoint (fewer when the
 * input is shorter), then the tokenizer's bytes.  The checkpoint is copied
 * to an aligned buffer, as a mapping would be.  Accepted inputs are written
 * to /dev/null; any crash, sanitizer report or leak is a finding, error
 * returns are expected.  Seed corpus: corpus/llama2c/ (small valid
 * checkpoints, tied and untied, written by tests/fuzz/gen_corpus_llama2c.py).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/model_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model_l2c im;
	char err[512];
	uint32_t n;
	uint8_t *ckpt;

	if (size < 4)
		return 0;
	memcpy(&n, data, 4);
	data += 4;
	size -= 4;
	if (n > size)
		n = (uint32_t)size;
	ckpt = malloc(n ? n : 1);
	if (!ckpt)
		return 0;
	memcpy(ckpt, data, n);
	if (model_l2c_parse(ckpt, n, "ckpt", data + n, size - n, "vocab", &im, err,
			    sizeof(err)) == CM_OK)
		(void)model_l2c_write(&im, "fuzz", "/dev/null", err, sizeof(err));
	model_l2c_deinit(&im);
	free(ckpt);
	return 0;
}
