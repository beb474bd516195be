/*
 * expert_cache.c - the experts' rows16 copies in a mapped cache file
 * (expert_cache.h): the header the model and ISA call for, the check of an
 * existing file against it, the build of a new one on the pool's threads,
 * and the registration of every copy with the wk_cpu_mm.
 */
#include "worker/cpu/expert_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "worker/cpu/matmul.h"
#include "worker/cpu/pack.h"
#include "worker/cpu/pool.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"

#define XC_MAGIC "SLXPRT01"
#define XC_VERSION 2u /* the rows16 layout of pack.h; bump when it changes (2: Q5_K in planes) */
#define XC_ALIGN ((uint64_t)4096)

/* The header's fixed part; the table of entries follows it. */
struct xc_head {
	char magic[8];
	uint32_t version, n_entries;
	uint64_t src_size;
	int64_t src_mtime_ns;
	uint64_t src_dev, src_ino;
	uint32_t src_mode, pad; /* the model's permission bits (the file's follow them) */
	uint64_t total_bytes;  /* of the whole file */
	uint64_t header_bytes; /* a multiple of XC_ALIGN */
};

/* One (layer, matrix) pair: its experts' copies at offset + e * stride. */
struct xc_entry {
	uint32_t layer, matrix; /* matrix 0 gate, 1 up, 2 down */
	uint32_t type, n_expert;
	uint32_t rows, cols;
	uint64_t offset, stride;
};

struct wk_cpu_xcache {
	uint8_t *map;
	size_t bytes;
};

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int wk_cpu_xcache_dir(const char *configured, char *buf, size_t len)
{
	const char *c = getenv("CACHE_DIRECTORY"), *x = getenv("XDG_CACHE_HOME"),
		   *h = getenv("HOME");
	int n;

	if (configured)
		n = snprintf(buf, len, "%s", configured);
	else if (c && c[0] == '/') /* systemd's CacheDirectory= (the first of a list) */
		n = snprintf(buf, len, "%.*s/experts", (int)strcspn(c, ":"), c);
	else if (x && x[0] == '/')
		n = snprintf(buf, len, "%s/sluice/experts", x);
	else if (h && h[0] == '/')
		n = snprintf(buf, len, "%s/.cache/sluice/experts", h);
	else
		return -1;
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* The expert tensor of layer l for matrix k (0 gate, 1 up, 2 down). */
static const struct wk_tensor *xc_tensor(const struct wk_layer *layers, uint32_t l, int k)
{
	const struct wk_layer *L = &layers[l];

	return k == 0 ? &L->exp_gate : k == 1 ? &L->exp_up : &L->exp_down;
}

/* Whether the experts of t get copies on mm's ISA (NULL: AVX-512's, a
 * strip kernel for every type with a rows16 layout). */
static int xc_eligible(const struct wk_hparams *hp, const struct wk_cpu_mm *mm,
		       const struct wk_tensor *t)
{
	return t->data != NULL && t->expert_stride != 0 && hp->n_expert > 0 && t->rows > 0 &&
	       t->rows <= INT32_MAX && t->cols <= INT32_MAX && wk_qtype_supported(t->type) &&
	       t->cols % wk_qtype_block_elems(t->type) == 0 &&
	       (mm ? wk_cpu_mm_can_pack(mm, t->type) == 2 : wk_cpu_pack_supported(t->type)) &&
	       wk_cpu_pack_bytes(t->type, (int)t->rows, (int)t->cols) > 0;
}

/* Header bytes for n entries. */
static uint64_t xc_header_bytes(uint32_t n)
{
	return round_up(sizeof(struct xc_head) + (uint64_t)n * sizeof(struct xc_entry), XC_ALIGN);
}

/*
 * The file's table for these layers on mm's ISA (NULL: AVX-512's): the
 * eligible (layer, matrix) pairs in order, their experts' copies from
 * offset off on.  Writes the entries to out when given (else only
 * counts); returns their number, *end the offset past the last copy.
 */
static uint32_t xc_layout(const struct wk_hparams *hp, const struct wk_layer *layers,
			  const struct wk_cpu_mm *mm, uint64_t off, uint8_t *out, uint64_t *end)
{
	uint32_t n = 0;

	for (uint32_t l = 0; l < hp->n_layer; l++)
		for (int k = 0; k < 3; k++) {
			const struct wk_tensor *t = xc_tensor(layers, l, k);
			struct xc_entry e;

			if (!xc_eligible(hp, mm, t))
				continue;
			memset(&e, 0, sizeof(e));
			e.layer = l;
			e.matrix = (uint32_t)k;
			e.type = t->type;
			e.n_expert = hp->n_expert;
			e.rows = (uint32_t)t->rows;
			e.cols = (uint32_t)t->cols;
			e.offset = off;
			e.stride = round_up(wk_cpu_pack_bytes(t->type, (int)t->rows, (int)t->cols),
					    XC_ALIGN);
			off += e.stride * e.n_expert;
			if (out)
				memcpy(out + (size_t)n * sizeof(e), &e, sizeof(e));
			n++;
		}
	*end = off;
	return n;
}

uint64_t wk_cpu_xcache_file_bytes(const struct wk_hparams *hp, const struct wk_layer *layers)
{
	uint64_t data;
	uint32_t n = xc_layout(hp, layers, NULL, 0, NULL, &data);

	return n ? xc_header_bytes(n) + data : 0;
}

/*
 * The header m and mm call for, zero-filled to its size (*hbytes); NULL
 * with *hbytes 0 when nothing is eligible, NULL with *hbytes 1 on no memory.
 */
static uint8_t *xc_header(const struct wk_model *m, const struct wk_cpu_mm *mm, size_t *hbytes)
{
	uint64_t data;
	uint32_t n = xc_layout(&m->hp, m->layers, mm, 0, NULL, &data);
	uint8_t *buf;
	struct xc_head h;

	*hbytes = 0;
	if (n == 0)
		return NULL;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, XC_MAGIC, 8);
	h.version = XC_VERSION;
	h.n_entries = n;
	h.src_size = m->file_bytes;
	h.src_mtime_ns = m->mtime_ns;
	h.src_dev = m->file_dev;
	h.src_ino = m->file_ino;
	h.src_mode = m->file_mode;
	h.header_bytes = xc_header_bytes(n);
	buf = cm_calloc(1, (size_t)h.header_bytes);
	if (buf == NULL) {
		*hbytes = 1;
		return NULL;
	}
	xc_layout(&m->hp, m->layers, mm, h.header_bytes, buf + sizeof(h), &h.total_bytes);
	memcpy(buf, &h, sizeof(h));
	*hbytes = (size_t)h.header_bytes;
	return buf;
}

static const struct xc_head *xc_head_of(const uint8_t *hdr)
{
	return (const struct xc_head *)(const void *)hdr;
}

static struct xc_entry xc_entry_of(const uint8_t *hdr, uint32_t i)
{
	struct xc_entry e;

	memcpy(&e, hdr + sizeof(struct xc_head) + (size_t)i * sizeof(e), sizeof(e));
	return e;
}

/* mkdir -p, mode 0700 for what it creates. */
static int mkdirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(p))
		return -1;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++)
		if (p[i] == '/' || p[i] == '\0') {
			char c = p[i];

			p[i] = '\0';
			if (mkdir(p, 0700) != 0 && errno != EEXIST)
				return -1;
			p[i] = c;
		}
	return 0;
}

/* The file name for m (expert_cache.h) under dir. */
static int xc_path(const struct wk_model *m, const struct wk_cpu_mm *mm, const char *dir,
		   char *out, size_t len)
{
	const char *base = strrchr(m->real_path, '/');
	char stem[65];
	size_t j = 0;
	int n;

	base = base ? base + 1 : m->real_path;
	for (size_t i = 0; base[i] && j < sizeof(stem) - 1; i++) {
		char c = base[i];

		stem[j++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'
				    ? c
				    : '_';
	}
	stem[j] = '\0';
	n = snprintf(out, len, "%s/%s-%016llx-%s.experts", dir, stem,
		     (unsigned long long)cm_fnv64(CM_FNV64_SEED, m->real_path, strlen(m->real_path)),
		     wk_cpu_isa_name(wk_cpu_mm_isa(mm)));
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Maps path when it is the file hdr describes: 0, else -1 (errno as found). */
static int xc_map(const char *path, const uint8_t *hdr, size_t hbytes, struct wk_cpu_xcache *c)
{
	uint64_t total = xc_head_of(hdr)->total_bytes;
	struct stat sb;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1, same;

	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != total ||
	    total > SIZE_MAX) {
		errno = EINVAL;
		goto out;
	}
	/* the header alone first: a stale file is not read */
	map = mmap(NULL, hbytes, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto out;
	same = memcmp(map, hdr, hbytes) == 0;
	munmap(map, hbytes);
	if (!same) {
		errno = EINVAL;
		goto out;
	}
	/* populated now: the worker's start reads the model file (its hash),
	 * which used to leave the experts in the page cache; without this a
	 * start after a reboot served its first requests from the disk
	 * (moe-1b: the first request's TTFT 419-459 ms against 135-269) */
	map = mmap(NULL, (size_t)total, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED)
		goto out;
	c->map = map;
	c->bytes = (size_t)total;
	rc = 0;
out:
	close(fd);
	return rc;
}

/* The build's pool tasks: one expert matrix each, from task0 on. */
struct xc_job {
	const struct wk_model *m;
	const uint8_t *hdr;
	uint8_t *dst;
	uint32_t n_expert;
	uint64_t task0;
};

static void xc_task(void *ctx, int task, int thread)
{
	const struct xc_job *j = ctx;
	uint64_t t = j->task0 + (uint64_t)task;
	struct xc_entry e = xc_entry_of(j->hdr, (uint32_t)(t / j->n_expert));
	uint32_t x = (uint32_t)(t % j->n_expert);
	struct wk_tensor w = wk_tensor_expert(xc_tensor(j->m->layers, e.layer, (int)e.matrix), x);

	(void)thread;
	wk_cpu_pack_rows16(e.type, w.data, (int)e.rows, (int)e.cols,
			   j->dst + e.offset + (uint64_t)x * e.stride);
}

/*
 * Removes the temporary files <path>.tmp.<pid> of builds whose process is
 * gone (a worker killed while writing): each is as large as the cache.
 */
static void xc_sweep(const char *dir, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t bl;
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL || base == NULL) {
		if (d)
			closedir(d);
		return;
	}
	base++;
	bl = strlen(base);
	while ((e = readdir(d)) != NULL) {
		char *end;
		long pid;
		char full[4400];

		if (strncmp(e->d_name, base, bl) != 0 || strncmp(e->d_name + bl, ".tmp.", 5) != 0)
			continue;
		errno = 0;
		pid = strtol(e->d_name + bl + 5, &end, 10);
		if (errno || *end != '\0' || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (snprintf(full, sizeof(full), "%s/%s", dir, e->d_name) < (int)sizeof(full))
			unlink(full);
	}
	closedir(d);
}

/* Writes the file hdr describes at path (through a temporary file). */
static enum cm_status xc_build(const struct wk_model *m, struct wk_pool *pool, const char *path,
			       const uint8_t *hdr, size_t hbytes, char *err, size_t err_len)
{
	const struct xc_head *h = xc_head_of(hdr);
	uint64_t total = h->total_bytes, tasks = (uint64_t)h->n_entries * m->hp.n_expert;
	char tmp[4300];
	uint8_t *map = MAP_FAILED;
	int fd = -1, rc;
	const char *what = "open";
	enum cm_status st = CM_EIO;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
		snprintf(err, err_len, "expert cache %s: path too long", path);
		return CM_EINVAL;
	}
	/* readable by whom the model is (the weights are the model's), never
	 * writable by others */
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	what = "chmod";
	if (fchmod(fd, (mode_t)(((m->file_mode ? m->file_mode : 0600) & 0644) | 0600)) != 0)
		goto fail;
	what = "reserving space";
	if (total > SIZE_MAX || total > (uint64_t)INT64_MAX) {
		errno = EFBIG;
		goto fail;
	}
	if ((rc = posix_fallocate(fd, 0, (off_t)total)) != 0) {
		errno = rc;
		goto fail;
	}
	what = "mmap";
	map = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail;
	memcpy(map, hdr, hbytes);
	for (uint64_t t0 = 0; t0 < tasks; t0 += WK_POOL_MAX_TASKS) {
		struct xc_job job = { m, hdr, map, m->hp.n_expert, t0 };
		int n = tasks - t0 > WK_POOL_MAX_TASKS ? WK_POOL_MAX_TASKS : (int)(tasks - t0);

		if (pool)
			wk_pool_run(pool, xc_task, &job, n);
		else
			for (int i = 0; i < n; i++)
				xc_task(&job, i, 0);
	}
	what = "writing";
	if (msync(map, (size_t)total, MS_SYNC) != 0)
		goto fail;
	munmap(map, (size_t)total);
	map = MAP_FAILED;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	what = "rename";
	if (rename(tmp, path) != 0)
		goto fail;
	return CM_OK;
fail:
	rc = errno;
	snprintf(err, err_len, "expert cache %s: %s failed: %s", tmp, what, strerror(rc));
	if (rc == ENOSPC || rc == EDQUOT || rc == EFBIG)
		st = CM_ELIMIT;
	if (map != MAP_FAILED)
		munmap(map, (size_t)total);
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return st;
}

enum cm_status wk_cpu_xcache_open(const struct wk_model *m, struct wk_cpu_mm *mm, const char *dir,
				  struct wk_cpu_xcache **out, struct wk_cpu_xcache_info *info,
				  char *err, size_t err_len)
{
	struct wk_cpu_xcache *c = NULL;
	size_t hbytes = 0;
	uint8_t *hdr = NULL;
	enum cm_status st = CM_OK;

	*out = NULL;
	memset(info, 0, sizeof(*info));
	err[0] = '\0';
	hdr = xc_header(m, mm, &hbytes);
	if (hdr == NULL) {
		if (hbytes)
			snprintf(err, err_len, "expert cache: out of memory");
		return hbytes ? CM_ENOMEM : CM_OK;
	}
	if (dir == NULL || dir[0] == '\0') {
		snprintf(err, err_len, "expert cache: no directory (worker.expert_cache_dir)");
		st = CM_EINVAL;
		goto out;
	}
	if (xc_path(m, mm, dir, info->path, sizeof(info->path)) != 0) {
		snprintf(err, err_len, "expert cache %s: path too long", dir);
		st = CM_EINVAL;
		goto out;
	}
	c = cm_calloc(1, sizeof(*c));
	if (c == NULL) {
		st = CM_ENOMEM;
		snprintf(err, err_len, "expert cache: out of memory");
		goto out;
	}
	if (xc_map(info->path, hdr, hbytes, c) != 0) {
		if (mkdirs(dir) != 0) {
			snprintf(err, err_len, "expert cache %s: cannot create the directory: %s", dir,
				 strerror(errno));
			st = CM_EIO;
			goto out;
		}
		info->build_ns = cm_mono_ns();
		xc_sweep(dir, info->path);
		st = xc_build(m, wk_cpu_mm_pool(mm), info->path, hdr, hbytes, err, err_len);
		info->build_ns = cm_mono_ns() - info->build_ns;
		if (st != CM_OK)
			goto out;
		if (xc_map(info->path, hdr, hbytes, c) != 0) {
			snprintf(err, err_len, "expert cache %s: the file written does not map back: %s",
				 info->path, strerror(errno));
			st = CM_EIO;
			goto out;
		}
		info->built = 1;
	}
	/* every copy registered (a failure, CM_ENOMEM growing the table,
	 * leaves those before it registered) */
	for (uint32_t i = 0; st == CM_OK && i < xc_head_of(hdr)->n_entries; i++) {
		struct xc_entry e = xc_entry_of(hdr, i);
		const struct wk_tensor *t = xc_tensor(m->layers, e.layer, (int)e.matrix);

		for (uint32_t x = 0; st == CM_OK && x < e.n_expert; x++) {
			struct wk_tensor w = wk_tensor_expert(t, x);

			st = wk_cpu_mm_pack_view(mm, e.type, w.data, (int)e.rows, (int)e.cols,
						 c->map + e.offset + (uint64_t)x * e.stride);
			info->matrices += st == CM_OK;
		}
	}
	info->bytes = c->bytes;
	/* registered copies are read from the mapping from now on: it
	 * stays, whatever the outcome */
	*out = c;
	c = NULL;
	if (st != CM_OK)
		snprintf(err, err_len, "expert cache %s: registering the copies failed (%s)",
			 info->path, cm_status_str(st));
out:
	wk_cpu_xcache_close(c);
	cm_free(hdr);
	return st;
}

void wk_cpu_xcache_close(struct wk_cpu_xcache *c)
{
	if (c == NULL)
		return;
	if (c->map)
		munmap(c->map, c->bytes);
	cm_free(c);
}
