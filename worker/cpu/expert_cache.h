/*
 * expert_cache.h - a mixture's experts in the strip kernels' layout, in a
 * file mapped like the model: the CPU backend's answer to "experts are
 * mapped, not copied" that still reads them as one stream per 16 rows.
 *
 * The dense matrices are copied into huge pages (pack.h); a mixture's
 * experts are most of its bytes and a step reads few of them, so they stay
 * file-backed: page cache, read on demand, shared by every worker of the
 * model, evictable.  Read in GGUF's layout the 16-row kernels transpose
 * every block (moe-1b decode 1.3-1.4x slower, docs/engine-cpu.md), so this
 * module writes every expert matrix once in the rows16 layout (pack.h) into
 * a cache file, maps it read-only, and registers each expert's copy with
 * the wk_cpu_mm (wk_cpu_mm_pack_view).  Products give bit for bit the
 * same values either way.
 *
 * The file, <dir>/<model file name>-<16 hex digits of its absolute path>-<isa>.experts:
 *   a header (4096 bytes): magic "SLXPRT01", the layout version, the model
 *   file's identity (size, mtime in ns, device, inode) and permission
 *   bits, the file's total size, and a table: per layer
 *   and matrix (gate, up, down) its type, rows, columns, experts, offset
 *   and stride;
 *   then each table entry's experts, every copy at a multiple of 4096.
 * Opening builds the header the model and ISA call for and maps the file
 * (populated: read now, as the worker's hash of the model reads the model)
 * only when its header is that one byte for byte and its size the total;
 * otherwise it rebuilds it: written to <name>.tmp.<pid> (space reserved
 * with posix_fallocate first, so a full disk is an error, not a SIGBUS),
 * synced, renamed over the old one.  Workers racing on one name each write
 * their own temporary file; the last rename wins, and each maps what it
 * wrote.  A build first removes the temporary files of this name whose
 * writer is gone (a worker killed while writing).  The file has the model file's read permissions (and the owner's
 * read and write), no one else's write; directories it creates are 0700.
 *
 * Owns: the mapping.
 */
#ifndef SLUICE_WORKER_CPU_EXPERT_CACHE_H
#define SLUICE_WORKER_CPU_EXPERT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct wk_model;
struct wk_cpu_mm;
struct wk_cpu_xcache;

/* What wk_cpu_xcache_open did. */
struct wk_cpu_xcache_info {
	uint64_t bytes;     /* of the mapped file (0: nothing cached) */
	int built;          /* 1: written by this open, 0: an existing file reused */
	int matrices;       /* expert matrices read from it */
	int64_t build_ns;   /* the time the writing took (built) */
	char path[4200];    /* the file */
};

/*
 * The directory of the cache files into buf: `configured` when given
 * (worker.expert_cache_dir, a --dir), else the default
 * $CACHE_DIRECTORY/experts (systemd's CacheDirectory=, the first of its
 * list), else $XDG_CACHE_HOME/sluice/experts, else
 * $HOME/.cache/sluice/experts.  0, or -1 when there is none (no variable
 * set to an absolute path) or it does not fit.
 */
int wk_cpu_xcache_dir(const char *configured, char *buf, size_t len);

/*
 * Bytes of the cache file of a model with these layers on an AVX-512
 * host (a strip kernel for every type with a rows16 layout): what
 * `sluice-model plan` prints; 0 when nothing would be cached.
 */
struct wk_hparams;
struct wk_layer;
uint64_t wk_cpu_xcache_file_bytes(const struct wk_hparams *hp, const struct wk_layer *layers);

/*
 * Maps the rows16 copies of every expert matrix of m whose type has strip
 * kernels on mm's ISA (building the file in dir, created when absent, if
 * it is missing or stale) and registers them with mm.  CM_OK with *out
 * NULL when m has no experts or none of their types has strip kernels.
 * On failure (a directory that cannot be written, a full disk, ...) err
 * says what and where, nothing is registered and the experts are read
 * from the model's mapping as before.
 */
enum cm_status wk_cpu_xcache_open(const struct wk_model *m, struct wk_cpu_mm *mm, const char *dir,
				  struct wk_cpu_xcache **out, struct wk_cpu_xcache_info *info,
				  char *err, size_t err_len) CM_WUR;
/* Unmaps; the wk_cpu_mm it registered with must not be used after. */
void wk_cpu_xcache_close(struct wk_cpu_xcache *c);

#endif
