/* TEMPORARY local shim until branch tok lands chat.h: not committed. */
#ifndef SLUICE_WORKER_CHAT_H
#define SLUICE_WORKER_CHAT_H
#include <stddef.h>
#include <stdint.h>
#include "common/status.h"
struct wk_chat_template;
struct wk_tok;
struct wk_chat_msg;
const struct wk_chat_template *wk_chat_template_by_name(const char *name);
const char *wk_chat_template_names(void);
const struct wk_chat_template *wk_chat_template_detect(const char *tmpl, size_t len);
enum cm_status wk_chat_encode(const struct wk_chat_template *t, const struct wk_tok *tok,
			      const struct wk_chat_msg *msgs, size_t n, int32_t *out, size_t cap,
			      size_t *n_out, char *err, size_t err_len);
#endif
