/* The power-cut recorder: an LD_PRELOAD library that records what each sync of a file under a
 * watched root made durable, and every name created, renamed or removed there.
 *
 * Enabled when MQSTORE_POWERCUT_ROOT (an absolute path) and MQSTORE_POWERCUT_DIR (the record
 * directory, holding data/) are both set; otherwise every wrapper passes straight through. Every
 * wrapper returns the real call's result and errno; recording never adds a failure.
 *
 * Data: at fsync / fdatasync of a regular file, before the real call, the whole file is copied
 * into data/<dev>-<ino> (hex) at the same offsets and the copy cut to the file's size; msync
 * (MS_SYNC) and sync_file_range (with SYNC_FILE_RANGE_WRITE) copy their range. Once the real call
 * returns 0 an event says so (SYNC with the durable size; RANGE with the range, and for msync the
 * size). A copy half done when the tree is stopped is legal: its sync had not returned.
 *
 * Names: one event per create (O_CREAT that made the file), mkdir, rename, unlink, rmdir, and per
 * fsync of a directory (DIRSYNC), appended to `events` with one write() on an O_APPEND descriptor,
 * so concurrent processes interleave whole records and the file's order is the global order.
 * When a new inode enters the tree, the copy left by an earlier file with the same inode number is
 * hard-linked to data/<dev>-<ino>.<pid>.<n> (named in the event) before the event is written, and
 * only then removed: a cut anywhere in between leaves every epoch its bytes.
 *
 * Event record (little-endian; mqstore.scripts.survival.power_cut.durable reads it):
 *   u32 len (whole record) | u16 kind | u16 flags | u32 pid | u16 len1 | u16 len2 |
 *   u64 dev | u64 ino | u64 a | u64 b | u64 c | path1 (len1 bytes) | path2 (len2 bytes)
 * Paths are relative to the root ("" is the root).
 *   CREATE, MKDIR: path1 the name, path2 the retired copy (or ""), a the parent directory's inode
 *   RENAME: path1 old, path2 new, a old parent, b new parent, c the inode replaced at new (or 0)
 *   UNLINK, RMDIR: path1, a the parent;  DIRSYNC: path1, ino the directory
 *   SYNC: a the durable size;  RANGE: a offset, b length, c the size (durable when flag SIZE)
 *   TRUNCATE: a the new size (not durable by itself)
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* fortify turns open() into an inline wrapper this file could not define */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EV_CREATE 1
#define EV_MKDIR 2
#define EV_RENAME 3
#define EV_UNLINK 4
#define EV_RMDIR 5
#define EV_DIRSYNC 6
#define EV_SYNC 7
#define EV_RANGE 8
#define EV_TRUNCATE 9
#define EV_FLAG_EXCHANGE 1
#define EV_FLAG_SIZE 2
#define EV_FLAG_DIR 4
#define EV_HEAD_SIZE 56
#define COPY_CHUNK (64 << 10) /* under malloc's mmap threshold: no fresh pages to fault in per sync */

struct ev_head {
    uint32_t len;
    uint16_t kind, flags;
    uint32_t pid;
    uint16_t len1, len2;
    uint64_t dev, ino, a, b, c;
};
_Static_assert(sizeof(struct ev_head) == EV_HEAD_SIZE, "event head size");

/* ---- the real functions ---- */

static void *real(void **slot, const char *name) {
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}
#define REAL_DECL(name, ret, ...)                                                                  \
    typedef ret (*name##_fn)(__VA_ARGS__);                                                         \
    static void *real_##name##_slot;                                                               \
    static name##_fn real_##name(void) { return (name##_fn)real(&real_##name##_slot, #name); }

REAL_DECL(open, int, const char *, int, ...)
REAL_DECL(open64, int, const char *, int, ...)
REAL_DECL(openat, int, int, const char *, int, ...)
REAL_DECL(openat64, int, int, const char *, int, ...)
REAL_DECL(creat, int, const char *, mode_t)
REAL_DECL(creat64, int, const char *, mode_t)
REAL_DECL(fsync, int, int)
REAL_DECL(fdatasync, int, int)
REAL_DECL(msync, int, void *, size_t, int)
REAL_DECL(sync_file_range, int, int, off64_t, off64_t, unsigned int)
REAL_DECL(mmap, void *, void *, size_t, int, int, int, off_t)
REAL_DECL(mmap64, void *, void *, size_t, int, int, int, off64_t)
REAL_DECL(munmap, int, void *, size_t)
REAL_DECL(mremap, void *, void *, size_t, size_t, int, ...)
REAL_DECL(rename, int, const char *, const char *)
REAL_DECL(renameat, int, int, const char *, int, const char *)
REAL_DECL(renameat2, int, int, const char *, int, const char *, unsigned int)
REAL_DECL(unlink, int, const char *)
REAL_DECL(unlinkat, int, int, const char *, int)
REAL_DECL(mkdir, int, const char *, mode_t)
REAL_DECL(mkdirat, int, int, const char *, mode_t)
REAL_DECL(rmdir, int, const char *)
REAL_DECL(ftruncate, int, int, off_t)
REAL_DECL(ftruncate64, int, int, off64_t)
REAL_DECL(truncate, int, const char *, off_t)
REAL_DECL(truncate64, int, const char *, off64_t)

/* ---- configuration ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_enabled;
static char g_root[PATH_MAX];
static size_t g_root_len;
static dev_t g_root_dev;
static char g_dir[PATH_MAX];
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_maps_lock = PTHREAD_MUTEX_INITIALIZER;

static void after_fork_child(void) {
    pthread_mutex_init(&g_log_lock, NULL);
    pthread_mutex_init(&g_maps_lock, NULL);
}

static void init(void) {
    const char *root = getenv("MQSTORE_POWERCUT_ROOT");
    const char *dir = getenv("MQSTORE_POWERCUT_DIR");
    struct stat st;
    if (root == NULL || dir == NULL || root[0] != '/' || dir[0] != '/' || strlen(dir) > PATH_MAX / 2) return;
    if (realpath(root, g_root) == NULL || stat(g_root, &st) != 0) return;
    g_root_len = strlen(g_root);
    if (g_root_len == 1) g_root_len = 0; /* the root "/": every absolute path is under it */
    g_root_dev = st.st_dev;
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    pthread_atfork(NULL, NULL, after_fork_child);
    g_enabled = 1;
}

static int enabled(void) {
    pthread_once(&g_once, init);
    return g_enabled;
}

/* ---- paths ---- */

static int fd_path(int fd, char *out, size_t cap) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n < 0) return -1;
    out[n] = 0;
    return 0;
}

/* The path relative to the root, or NULL when outside it. */
static const char *rel_of(const char *abs) {
    if (strncmp(abs, g_root, g_root_len) != 0) return NULL;
    if (abs[g_root_len] == 0) return abs + g_root_len;
    if (abs[g_root_len] == '/') return abs + g_root_len + 1;
    return NULL;
}

struct where {
    char abs[PATH_MAX];
    const char *rel;     /* NULL when outside the root */
    uint64_t parent_ino; /* 0 for the root itself */
};

/* Where (dirfd, path) names, its parent resolved and its last component kept as given (it may be
 * a symlink, or gone). Returns 1 when under the root. */
static int locate(int dirfd, const char *path, struct where *w) {
    char joined[2 * PATH_MAX], parent[PATH_MAX], base[PATH_MAX];
    struct stat st;
    w->abs[0] = 0;
    w->rel = NULL;
    w->parent_ino = 0;
    if (path == NULL || path[0] == 0) return 0;
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%s", path);
    } else {
        if (dirfd == AT_FDCWD) {
            if (getcwd(base, sizeof base) == NULL) return 0;
        } else if (fd_path(dirfd, base, sizeof base) != 0) {
            return 0;
        }
        snprintf(joined, sizeof joined, "%s/%s", base, path);
    }
    size_t n = strlen(joined);
    while (n > 1 && joined[n - 1] == '/') joined[--n] = 0;
    char *slash = strrchr(joined, '/');
    const char *last = slash + 1;
    if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0) {
        if (realpath(joined, w->abs) == NULL) return 0;
    } else {
        *slash = 0;
        if (realpath(joined[0] ? joined : "/", parent) == NULL) return 0;
        if (strlen(parent) + strlen(last) + 2 > PATH_MAX) return 0;
        snprintf(w->abs, sizeof w->abs, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, last);
    }
    w->rel = rel_of(w->abs);
    if (w->rel == NULL) return 0;
    if (w->rel[0] != 0) {
        snprintf(parent, sizeof parent, "%s", w->abs);
        char *cut = strrchr(parent, '/');
        if (cut == parent) cut[1] = 0; else *cut = 0;
        if (stat(parent, &st) == 0) w->parent_ino = st.st_ino;
    }
    return 1;
}

/* ---- the event log ---- */

static int g_log_fd = -1;
static dev_t g_log_dev;
static ino_t g_log_ino;

/* The log's descriptor, opened again when the number no longer names it (a child closed it). */
static int log_fd(void) {
    struct stat st;
    pthread_mutex_lock(&g_log_lock);
    if (g_log_fd < 0 || fstat(g_log_fd, &st) != 0 || st.st_ino != g_log_ino || st.st_dev != g_log_dev) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/events", g_dir);
        int fd = real_open()(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0 && fstat(fd, &st) == 0) {
            g_log_fd = fd;
            g_log_dev = st.st_dev;
            g_log_ino = st.st_ino;
        } else {
            g_log_fd = -1;
        }
    }
    int fd = g_log_fd;
    pthread_mutex_unlock(&g_log_lock);
    return fd;
}

static void emit(uint16_t kind, uint16_t flags, uint64_t dev, uint64_t ino, uint64_t a, uint64_t b, uint64_t c,
                 const char *p1, const char *p2) {
    char buf[EV_HEAD_SIZE + 2 * PATH_MAX];
    size_t l1 = p1 ? strlen(p1) : 0, l2 = p2 ? strlen(p2) : 0;
    if (l1 >= PATH_MAX || l2 >= PATH_MAX) return;
    struct ev_head h = {(uint32_t)(EV_HEAD_SIZE + l1 + l2), kind, flags, (uint32_t)getpid(), (uint16_t)l1,
                        (uint16_t)l2, dev, ino, a, b, c};
    memcpy(buf, &h, EV_HEAD_SIZE);
    if (l1) memcpy(buf + EV_HEAD_SIZE, p1, l1);
    if (l2) memcpy(buf + EV_HEAD_SIZE + l1, p2, l2);
    int fd = log_fd();
    if (fd >= 0 && write(fd, buf, h.len) < 0) { /* nothing to do: the record is missing, a sync unrecorded */ }
}

/* ---- durable copies ---- */

static void copy_name(char *out, size_t cap, uint64_t dev, uint64_t ino) {
    snprintf(out, cap, "%s/data/%llx-%llx", g_dir, (unsigned long long)dev, (unsigned long long)ino);
}

static int all_zero(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* The copy being brought up to date, and what it held before. */
struct copy {
    int fd;
    off_t old_end;
    char *src_buf, *old_buf; /* COPY_CHUNK each */
};

/* Copy [pos, end) of src (a descriptor, or memory at mem for pos) into the copy, writing only the
 * chunks that differ from what it holds: a sync dirties no page of the copy it did not change. */
static void copy_data(struct copy *c, int src, const char *mem, off_t pos, off_t end) {
    const off_t first = pos;
    while (pos < end) {
        size_t want = (size_t)(end - pos) < COPY_CHUNK ? (size_t)(end - pos) : COPY_CHUNK;
        const char *chunk = mem ? mem + (pos - first) : c->src_buf;
        ssize_t got = mem ? (ssize_t)want : pread(src, c->src_buf, want, pos);
        if (got <= 0) return;
        size_t held = pos < c->old_end ? (size_t)(c->old_end - pos) : 0;
        if (held > (size_t)got) held = (size_t)got;
        int same = all_zero(chunk + held, (size_t)got - held) &&
                   (held == 0 || (pread(c->fd, c->old_buf, held, pos) == (ssize_t)held &&
                                  memcmp(chunk, c->old_buf, held) == 0));
        if (!same && pwrite(c->fd, chunk, (size_t)got, pos) != got) return;
        pos += got;
    }
}

/* [pos, end) of the source is a hole: the copy reads zeros there too. */
static void copy_hole(struct copy *c, off_t pos, off_t end) {
    if (end > c->old_end) end = c->old_end;
    if (pos >= end) return;
    if (fallocate(c->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, pos, end - pos) == 0) return;
    memset(c->src_buf, 0, COPY_CHUNK);
    for (; pos < end; pos += COPY_CHUNK) {
        size_t n = (size_t)(end - pos) < COPY_CHUNK ? (size_t)(end - pos) : COPY_CHUNK;
        if (pwrite(c->fd, c->src_buf, n, pos) != (ssize_t)n) return;
    }
}

/* Copy [start, end) of src (a descriptor open for reading, or -1 and memory at mem) into the inode's
 * copy at the same offsets; when whole, the copy is first cut to end and the source's holes (and
 * unwritten extents with nothing cached) are skipped with SEEK_DATA. */
static void copy_range(int src, const char *mem, uint64_t dev, uint64_t ino, off_t start, off_t end, int whole) {
    char path[PATH_MAX];
    struct stat st;
    struct copy c;
    copy_name(path, sizeof path, dev, ino);
    c.fd = real_open()(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (c.fd < 0) return;
    c.old_end = fstat(c.fd, &st) == 0 ? st.st_size : 0;
    if (whole && real_ftruncate()(c.fd, end) == 0 && end < c.old_end) c.old_end = end;
    c.src_buf = malloc(COPY_CHUNK);
    c.old_buf = malloc(COPY_CHUNK);
    if (c.src_buf && c.old_buf) {
        for (off_t pos = start; pos < end;) {
            off_t data = whole ? lseek(src, pos, SEEK_DATA) : pos;
            if (data < 0) data = errno == ENXIO ? end : pos; /* ENXIO: holes to the end */
            if (data > end) data = end;
            copy_hole(&c, pos, data);
            if (data >= end) break;
            off_t hole = whole ? lseek(src, data, SEEK_HOLE) : end;
            if (hole <= data || hole > end) hole = end;
            copy_data(&c, src, mem ? mem + (data - start) : NULL, data, hole);
            pos = hole;
        }
    }
    free(c.src_buf);
    free(c.old_buf);
    close(c.fd);
}

/* A descriptor for reading fd's file (fd may be write-only); the caller closes it when != fd. */
static int readable(int fd) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int r = real_open()(link, O_RDONLY | O_CLOEXEC);
    return r >= 0 ? r : fd;
}

/* A new inode enters the tree: keep the copy an earlier file with this inode number left. */
static void retire(uint64_t dev, uint64_t ino, char *name, size_t cap) {
    static unsigned long counter;
    char cur[PATH_MAX], kept[PATH_MAX];
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    copy_name(cur, sizeof cur, dev, ino);
    snprintf(name, cap, "%llx-%llx.%d.%lu", (unsigned long long)dev, (unsigned long long)ino, (int)getpid(), n);
    snprintf(kept, sizeof kept, "%s/data/%s", g_dir, name);
    if (link(cur, kept) != 0) name[0] = 0;
}

static void enter(uint16_t kind, const struct stat *st, const struct where *w) {
    char retired[PATH_MAX], cur[PATH_MAX];
    retire(st->st_dev, st->st_ino, retired, sizeof retired);
    emit(kind, 0, st->st_dev, st->st_ino, w->parent_ino, 0, 0, w->rel, retired);
    if (retired[0]) {
        copy_name(cur, sizeof cur, st->st_dev, st->st_ino);
        real_unlink()(cur);
    }
}

/* ---- data syncs ---- */

/* Where fd's file sits under the root (rel points into abs), or NULL. */
static const char *fd_rel(int fd, struct stat *st, char *abs) {
    if (!enabled() || fstat(fd, st) != 0 || st->st_dev != g_root_dev) return NULL;
    if (fd_path(fd, abs, PATH_MAX) != 0) return NULL;
    return rel_of(abs);
}

static int sync_whole(int fd, int (*call)(int)) {
    struct stat st;
    char abs[PATH_MAX];
    const char *rel = fd_rel(fd, &st, abs);
    if (rel == NULL || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return call(fd);
    if (S_ISREG(st.st_mode)) {
        int src = readable(fd);
        copy_range(src, NULL, st.st_dev, st.st_ino, 0, st.st_size, 1);
        if (src != fd) close(src);
    }
    int r = call(fd), saved = errno;
    if (r == 0) {
        if (S_ISDIR(st.st_mode)) emit(EV_DIRSYNC, 0, st.st_dev, st.st_ino, 0, 0, 0, rel, NULL);
        else emit(EV_SYNC, 0, st.st_dev, st.st_ino, (uint64_t)st.st_size, 0, 0, rel, NULL);
    }
    errno = saved;
    return r;
}

int fsync(int fd) { return sync_whole(fd, real_fsync()); }
int fdatasync(int fd) { return sync_whole(fd, real_fdatasync()); }

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    struct stat st;
    char abs[PATH_MAX];
    const char *rel = (flags & SYNC_FILE_RANGE_WRITE) ? fd_rel(fd, &st, abs) : NULL;
    if (rel == NULL || !S_ISREG(st.st_mode)) return real_sync_file_range()(fd, offset, nbytes, flags);
    off64_t end = nbytes == 0 || offset + nbytes > st.st_size ? st.st_size : offset + nbytes;
    if (end > offset) {
        int src = readable(fd);
        copy_range(src, NULL, st.st_dev, st.st_ino, offset, end, 0);
        if (src != fd) close(src);
    }
    int r = real_sync_file_range()(fd, offset, nbytes, flags), saved = errno;
    if (r == 0 && end > offset)
        emit(EV_RANGE, 0, st.st_dev, st.st_ino, (uint64_t)offset, (uint64_t)(end - offset), 0, rel, NULL);
    errno = saved;
    return r;
}

/* ---- mappings: an msync's addresses back to a file and offsets ---- */

struct map_ent {
    uintptr_t start;
    size_t len;
    uint64_t dev, ino;
    off_t file_pos;
    off_t size_at_map;
    char *path; /* absolute, as mapped */
};
static struct map_ent *g_maps;
static size_t g_nmaps, g_cap;

static void maps_put(const struct map_ent *e) {
    if (g_nmaps == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 64;
        struct map_ent *grown = realloc(g_maps, cap * sizeof *grown);
        if (grown == NULL) return;
        g_maps = grown;
        g_cap = cap;
    }
    g_maps[g_nmaps++] = *e;
}

/* Forget [start, start + len): entries are cut, split or dropped. Caller holds g_maps_lock. */
static void maps_cut(uintptr_t start, size_t len) {
    uintptr_t end = start + len;
    for (size_t i = 0; i < g_nmaps;) {
        struct map_ent *e = &g_maps[i];
        uintptr_t e_end = e->start + e->len;
        if (e_end <= start || e->start >= end) { i++; continue; }
        struct map_ent tail = *e;
        int keep_head = e->start < start, keep_tail = e_end > end;
        if (keep_tail) {
            tail.file_pos += (off_t)(end - e->start);
            tail.start = end;
            tail.len = e_end - end;
            tail.path = strdup(e->path);
        }
        if (keep_head) {
            e->len = start - e->start;
            i++;
        } else {
            free(e->path);
            g_maps[i] = g_maps[--g_nmaps];
        }
        if (keep_tail && tail.path) maps_put(&tail);
    }
}

static void note_map(void *p, size_t len, int flags, int fd, off_t pos) {
    if (p == MAP_FAILED || !enabled()) return;
    int saved = errno;
    pthread_mutex_lock(&g_maps_lock);
    maps_cut((uintptr_t)p, len); /* MAP_FIXED replaces what was there */
    struct stat st;
    char abs[PATH_MAX];
    if (fd >= 0 && !(flags & MAP_ANONYMOUS) && (flags & MAP_SHARED) && fd_rel(fd, &st, abs) != NULL &&
        S_ISREG(st.st_mode)) {
        struct map_ent e = {(uintptr_t)p, len, st.st_dev, st.st_ino, pos, st.st_size, strdup(abs)};
        if (e.path) maps_put(&e);
    }
    pthread_mutex_unlock(&g_maps_lock);
    errno = saved;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t pos) {
    void *p = real_mmap()(addr, len, prot, flags, fd, pos);
    note_map(p, len, flags, fd, pos);
    return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t pos) {
    void *p = real_mmap64()(addr, len, prot, flags, fd, pos);
    note_map(p, len, flags, fd, pos);
    return p;
}

int munmap(void *addr, size_t len) {
    int r = real_munmap()(addr, len), saved = errno;
    if (r == 0 && enabled()) {
        pthread_mutex_lock(&g_maps_lock);
        maps_cut((uintptr_t)addr, len);
        pthread_mutex_unlock(&g_maps_lock);
    }
    errno = saved;
    return r;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    void *p = real_mremap()(old, old_len, new_len, flags, want);
    if (p == MAP_FAILED || !enabled()) return p;
    int saved = errno;
    pthread_mutex_lock(&g_maps_lock);
    struct map_ent moved = {0};
    for (size_t i = 0; i < g_nmaps; i++)
        if (g_maps[i].start == (uintptr_t)old) {
            moved = g_maps[i];
            moved.path = strdup(moved.path);
        }
    maps_cut((uintptr_t)old, old_len);
    maps_cut((uintptr_t)p, new_len);
    if (moved.path) {
        moved.start = (uintptr_t)p;
        moved.len = new_len;
        maps_put(&moved);
    }
    pthread_mutex_unlock(&g_maps_lock);
    errno = saved;
    return p;
}

struct seg {
    const char *mem;
    uint64_t dev, ino;
    off_t start, end, size;
    char path[PATH_MAX];
};

/* The file ranges [addr, addr + len) maps, with each file's size now (as mapped if renamed since). */
static size_t find_segs(uintptr_t addr, size_t len, struct seg *segs, size_t cap) {
    size_t n = 0;
    uintptr_t end = addr + len;
    pthread_mutex_lock(&g_maps_lock);
    for (size_t i = 0; i < g_nmaps && n < cap; i++) {
        struct map_ent *e = &g_maps[i];
        uintptr_t lo = e->start > addr ? e->start : addr, hi = e->start + e->len < end ? e->start + e->len : end;
        if (lo >= hi) continue;
        struct seg *s = &segs[n++];
        s->mem = (const char *)lo;
        s->dev = e->dev;
        s->ino = e->ino;
        s->start = e->file_pos + (off_t)(lo - e->start);
        s->end = s->start + (off_t)(hi - lo);
        s->size = e->size_at_map;
        snprintf(s->path, sizeof s->path, "%s", e->path);
    }
    pthread_mutex_unlock(&g_maps_lock);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(segs[i].path, &st) == 0 && st.st_ino == segs[i].ino && st.st_dev == segs[i].dev)
            segs[i].size = st.st_size;
    }
    return n;
}

int msync(void *addr, size_t len, int flags) {
    if (!(flags & MS_SYNC) || !enabled()) return real_msync()(addr, len, flags);
    enum { MAX_SEGS = 16 };
    struct seg *segs = malloc(MAX_SEGS * sizeof *segs);
    size_t n = segs ? find_segs((uintptr_t)addr, len, segs, MAX_SEGS) : 0;
    for (size_t i = 0; i < n; i++) {
        off_t end = segs[i].end < segs[i].size ? segs[i].end : segs[i].size;
        if (end > segs[i].start) copy_range(-1, segs[i].mem, segs[i].dev, segs[i].ino, segs[i].start, end, 0);
    }
    int r = real_msync()(addr, len, flags), saved = errno;
    for (size_t i = 0; r == 0 && i < n; i++) {
        const char *rel = rel_of(segs[i].path);
        emit(EV_RANGE, EV_FLAG_SIZE, segs[i].dev, segs[i].ino, (uint64_t)segs[i].start,
             (uint64_t)(segs[i].end - segs[i].start), (uint64_t)segs[i].size, rel, NULL);
    }
    free(segs);
    errno = saved;
    return r;
}

/* ---- names ---- */

static int opened(int fd, int existed, int flags) {
    if (fd < 0 || !(flags & O_CREAT) || existed) return fd;
    int saved = errno;
    struct stat st;
    struct where w;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fd_path(fd, w.abs, sizeof w.abs) == 0) {
        struct where parent;
        if (locate(AT_FDCWD, w.abs, &parent) && parent.rel[0] != 0) enter(EV_CREATE, &st, &parent);
    }
    errno = saved;
    return fd;
}

/* Whether the file O_CREAT may make is there already (O_EXCL: a success made it). */
static int existed_before(int dirfd, const char *path, int flags) {
    struct stat st;
    if (!(flags & O_CREAT) || (flags & O_EXCL) || !enabled()) return 0;
    int saved = errno;
    int there = fstatat(dirfd, path, &st, 0) == 0 || errno != ENOENT;
    errno = saved;
    return there;
}

#define MODE_ARG(flags, mode)                                                                      \
    mode_t mode = 0;                                                                               \
    if ((flags) & (O_CREAT | __O_TMPFILE)) {                                                       \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode = (mode_t)va_arg(ap, int);                                                            \
        va_end(ap);                                                                                \
    }

int open(const char *path, int flags, ...) {
    MODE_ARG(flags, mode)
    int existed = existed_before(AT_FDCWD, path, flags);
    return opened(real_open()(path, flags, mode), existed, flags);
}
int open64(const char *path, int flags, ...) {
    MODE_ARG(flags, mode)
    int existed = existed_before(AT_FDCWD, path, flags);
    return opened(real_open64()(path, flags, mode), existed, flags);
}
int openat(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags, mode)
    int existed = existed_before(dirfd, path, flags);
    return opened(real_openat()(dirfd, path, flags, mode), existed, flags);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags, mode)
    int existed = existed_before(dirfd, path, flags);
    return opened(real_openat64()(dirfd, path, flags, mode), existed, flags);
}
int creat(const char *path, mode_t mode) {
    int existed = existed_before(AT_FDCWD, path, O_CREAT);
    return opened(real_creat()(path, mode), existed, O_CREAT);
}
int creat64(const char *path, mode_t mode) {
    int existed = existed_before(AT_FDCWD, path, O_CREAT);
    return opened(real_creat64()(path, mode), existed, O_CREAT);
}

/* rename: both under the root is a RENAME; only the source, a removal; only the target, an entry. */
static int renamed(int r, int have_old, const struct stat *so, int have_new, const struct stat *sn,
                   const struct where *wo, const struct where *wn, unsigned int how) {
    if (r != 0 || !have_old) return r;
    int saved = errno;
    int dir = S_ISDIR(so->st_mode);
    if (wo->rel && wn->rel) {
        uint16_t flags = (uint16_t)((dir ? EV_FLAG_DIR : 0) | ((how & RENAME_EXCHANGE) ? EV_FLAG_EXCHANGE : 0));
        emit(EV_RENAME, flags, so->st_dev, so->st_ino, wo->parent_ino, wn->parent_ino, have_new ? sn->st_ino : 0,
             wo->rel, wn->rel);
    } else if (wo->rel) {
        emit(dir ? EV_RMDIR : EV_UNLINK, 0, so->st_dev, so->st_ino, wo->parent_ino, 0, 0, wo->rel, NULL);
    } else if (wn->rel) {
        enter(dir ? EV_MKDIR : EV_CREATE, so, wn);
    }
    errno = saved;
    return r;
}

#define RENAME_BODY(call, olddirfd, oldpath, newdirfd, newpath, how)                               \
    if (!enabled()) return call;                                                                   \
    int saved = errno;                                                                             \
    struct where wo, wn;                                                                           \
    struct stat so, sn;                                                                            \
    int in_old = locate(olddirfd, oldpath, &wo), in_new = locate(newdirfd, newpath, &wn);          \
    int have_old = (in_old || in_new) && lstat(wo.abs, &so) == 0;                                  \
    int have_new = have_old && lstat(wn.abs, &sn) == 0;                                            \
    errno = saved;                                                                                 \
    return renamed(call, have_old, &so, have_new, &sn, &wo, &wn, how);

int rename(const char *oldpath, const char *newpath) {
    RENAME_BODY(real_rename()(oldpath, newpath), AT_FDCWD, oldpath, AT_FDCWD, newpath, 0)
}
int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    RENAME_BODY(real_renameat()(olddirfd, oldpath, newdirfd, newpath), olddirfd, oldpath, newdirfd, newpath, 0)
}
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int how) {
    RENAME_BODY(real_renameat2()(olddirfd, oldpath, newdirfd, newpath, how), olddirfd, oldpath, newdirfd, newpath,
                how)
}

static int removed(int dirfd, const char *path, int is_dir, int (*call)(int, const char *, int), int flag) {
    if (!enabled()) return call(dirfd, path, flag);
    int saved = errno;
    struct where w;
    struct stat st;
    int known = locate(dirfd, path, &w) && w.rel[0] != 0 && lstat(w.abs, &st) == 0;
    errno = saved;
    int r = call(dirfd, path, flag);
    saved = errno;
    if (r == 0 && known) emit(is_dir ? EV_RMDIR : EV_UNLINK, 0, st.st_dev, st.st_ino, w.parent_ino, 0, 0, w.rel, NULL);
    errno = saved;
    return r;
}

static int call_unlink(int dirfd, const char *path, int flag) { (void)dirfd; (void)flag; return real_unlink()(path); }
static int call_rmdir(int dirfd, const char *path, int flag) { (void)dirfd; (void)flag; return real_rmdir()(path); }
static int call_unlinkat(int dirfd, const char *path, int flag) { return real_unlinkat()(dirfd, path, flag); }

int unlink(const char *path) { return removed(AT_FDCWD, path, 0, call_unlink, 0); }
int rmdir(const char *path) { return removed(AT_FDCWD, path, 1, call_rmdir, 0); }
int unlinkat(int dirfd, const char *path, int flag) {
    return removed(dirfd, path, (flag & AT_REMOVEDIR) != 0, call_unlinkat, flag);
}

static int made_dir(int r, int dirfd, const char *path) {
    if (r != 0 || !enabled()) return r;
    int saved = errno;
    struct where w;
    struct stat st;
    if (locate(dirfd, path, &w) && w.rel[0] != 0 && lstat(w.abs, &st) == 0) enter(EV_MKDIR, &st, &w);
    errno = saved;
    return r;
}

int mkdir(const char *path, mode_t mode) { return made_dir(real_mkdir()(path, mode), AT_FDCWD, path); }
int mkdirat(int dirfd, const char *path, mode_t mode) {
    return made_dir(real_mkdirat()(dirfd, path, mode), dirfd, path);
}

/* ---- sizes (not durable by themselves; kept for the report) ---- */

static int cut_fd(int r, int fd, off_t size) {
    struct stat st;
    char abs[PATH_MAX];
    if (r != 0) return r;
    int saved = errno;
    const char *rel = fd_rel(fd, &st, abs);
    if (rel != NULL && S_ISREG(st.st_mode)) emit(EV_TRUNCATE, 0, st.st_dev, st.st_ino, (uint64_t)size, 0, 0, rel, NULL);
    errno = saved;
    return r;
}

static int cut_path(int r, const char *path, off_t size) {
    if (r != 0 || !enabled()) return r;
    int saved = errno;
    struct where w;
    struct stat st;
    if (locate(AT_FDCWD, path, &w) && stat(w.abs, &st) == 0 && S_ISREG(st.st_mode))
        emit(EV_TRUNCATE, 0, st.st_dev, st.st_ino, (uint64_t)size, 0, 0, w.rel, NULL);
    errno = saved;
    return r;
}

int ftruncate(int fd, off_t size) { return cut_fd(real_ftruncate()(fd, size), fd, size); }
int ftruncate64(int fd, off64_t size) { return cut_fd(real_ftruncate64()(fd, size), fd, size); }
int truncate(const char *path, off_t size) { return cut_path(real_truncate()(path, size), path, size); }
int truncate64(const char *path, off64_t size) { return cut_path(real_truncate64()(path, size), path, size); }
