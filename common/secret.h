/*
 * secret.h - reading a small secret from a file (the API key pepper, the
 * Redis password): a regular file with no group or other permissions (or,
 * owned by root, group read at most: 0640, 0440 - a Kubernetes secret
 * mounted with fsGroup), one trailing newline (or CRLF) dropped.
 *
 * Messages name the file and what was wrong, never the secret.  The caller
 * owns the buffer and wipes it with cm_wipe() when done.
 */
#ifndef SLUICE_COMMON_SECRET_H
#define SLUICE_COMMON_SECRET_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/*
 * Reads the file at `path` into buf[cap].  `what` names the secret in
 * messages ("pepper file", "gateway.redis.password_file").  *len receives
 * the length after the trailing newline is dropped; a file longer than
 * `cap` bytes (before that) is CM_EFORMAT.  CM_ENOTFOUND / CM_EPERM (also
 * for a mode with group or other bits) / CM_EIO.
 */
enum cm_status cm_secret_read(const char *path, const char *what, uint8_t *buf, size_t cap,
			      size_t *len, char *err, size_t errlen);

#endif
