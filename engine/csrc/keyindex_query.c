/* The index probes of a key query: walks of the chains of an index file (engine/keyindex/index_file.py has
 * the byte table), every key of a page in one call. */
#include "jhash.h"
#include "kernels.h"

#define HEADER_SIZE 40
#define ENTRY_SIZE 20

/* One key's walk: up to `want` offsets into `found`; returns how many, `*next_no` the entry to read next
 * (0: the chain has ended). The stops are IndexFile.selectPhyOffset's, and a chain only goes down. */
static int64_t walk_chain(const uint8_t *slots, Py_ssize_t slot_count, const uint8_t *entries, Py_ssize_t entry_count,
                          int64_t index_count, int64_t file_begin_ms, int64_t key_hash, int64_t want, int64_t from_no,
                          int64_t begin_ms, int64_t end_ms, int64_t *found, int64_t *next_no) {
    *next_no = 0;
    int64_t entry_no = from_no;
    if (entry_no <= 0) {
        int64_t slot = key_hash % slot_count;
        entry_no = mq_be32(slots + 4 * (slot < 0 ? slot + slot_count : slot));
    }
    if (index_count <= 1 || entry_no <= 0 || entry_no > index_count) {
        return 0;
    }
    int64_t count = 0;
    for (;;) {
        if (count >= want) {
            *next_no = entry_no;
            return count;
        }
        if (entry_no >= entry_count) {
            return count;
        }
        const uint8_t *entry = entries + ENTRY_SIZE * entry_no;
        int64_t diff_s = mq_be32(entry + 12);
        if (diff_s < 0) {
            return count;
        }
        int64_t time_ms = (int64_t)((uint64_t)file_begin_ms + (uint64_t)diff_s * 1000u);  /* numpy's wrap */
        if (mq_be32(entry) == key_hash && time_ms >= begin_ms && time_ms <= end_ms) {
            found[count++] = mq_be64(entry + 4);
        }
        int64_t prev_no = mq_be32(entry + 16);
        if (prev_no <= 0 || prev_no > index_count || prev_no >= entry_no || time_ms < begin_ms) {
            return count;
        }
        entry_no = prev_no;
    }
}

/* The offsets of each key, as Python lists, and the entries to read next: built once the walks are done. */
static PyObject *pages_of(const int64_t *found, const int64_t *want, const int64_t *count, const int64_t *next,
                          Py_ssize_t n) {
    PyObject *pages = PyList_New(n), *next_nos = PyList_New(n);
    if (pages == NULL || next_nos == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *page = PyList_New((Py_ssize_t)count[i]);
        if (page == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(pages, i, page);
        for (int64_t j = 0; j < count[i]; j++) {
            PyObject *phys_offset = PyLong_FromLongLong(found[j]);
            if (phys_offset == NULL) {
                goto fail;
            }
            PyList_SET_ITEM(page, (Py_ssize_t)j, phys_offset);
        }
        found += want[i];
        PyObject *next_no = PyLong_FromLongLong(next[i]);
        if (next_no == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(next_nos, i, next_no);
    }
    return Py_BuildValue("(NN)", pages, next_nos);
fail:
    Py_XDECREF(pages);
    Py_XDECREF(next_nos);
    return NULL;
}

PyObject *mq_index_select(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer header, slots, entries, keys;
    long long begin_ms, end_ms;
    if (!PyArg_ParseTuple(args, "y*y*y*y*LL", &header, &slots, &entries, &keys, &begin_ms, &end_ms)) {
        return NULL;
    }
    PyObject *result = NULL;
    int64_t *found = NULL, *count = NULL;
    Py_ssize_t n3;
    if (!mq_int64s(&keys, &n3)) {
        goto done;
    }
    if (n3 % 3 != 0) {
        PyErr_SetString(PyExc_ValueError, "keys is not rows of (key_hash, want, from_no)");
        goto done;
    }
    if (header.len != HEADER_SIZE || slots.len % 4 != 0 || slots.len == 0 || entries.len % ENTRY_SIZE != 0) {
        PyErr_SetString(PyExc_ValueError, "header, slots or entries are not an index file's");
        goto done;
    }
    Py_ssize_t n = n3 / 3;
    const int64_t *hash = keys.buf, *want = hash + n, *from = want + n;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (want[i] < 0 || want[i] > (1 << 24)) {
            PyErr_Format(PyExc_ValueError, "key %zd wants %lld offsets", i, (long long)want[i]);
            goto done;
        }
        total += want[i];
    }
    found = PyMem_Malloc(sizeof(int64_t) * (size_t)(total + 2 * n + 1));
    if (found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    count = found + total;
    int64_t *next = count + n;
    const uint8_t *head = header.buf;
    int64_t index_count = mq_be32(head + 36), file_begin_ms = mq_be64(head);
    Py_BEGIN_ALLOW_THREADS
    int64_t *out = found;
    for (Py_ssize_t i = 0; i < n; i++) {
        count[i] = walk_chain(slots.buf, slots.len / 4, entries.buf, entries.len / ENTRY_SIZE, index_count,
                              file_begin_ms, hash[i], want[i], from[i], begin_ms, end_ms, out, &next[i]);
        out += want[i];
    }
    Py_END_ALLOW_THREADS
    result = pages_of(found, want, count, next, n);
done:
    PyMem_Free(found);
    PyBuffer_Release(&header);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&keys);
    return result;
}

/* The walks of a key query in one index file, for every key at once, as flat columns (engine/keyindex/probe.py):
 * key i walks this file when it still wants offsets (wants[i] > 0) and its place is this file
 * (places[i] == file_pos); its offsets are appended to the candidates, each with its key, and its place moves
 * on: the entry to read next here, or the head of its chain in the next file. */
PyObject *mq_index_probe(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer header, slots, entries, hashes, wants, places, from_nos, cand_keys, cand_phys;
    long long file_pos, file_count, begin_ms, end_ms, count;
    int walk, stop;
    if (!PyArg_ParseTuple(args, "y*y*y*LLppLLy*w*w*w*w*w*L", &header, &slots, &entries, &file_pos, &file_count, &walk,
                          &stop, &begin_ms, &end_ms, &hashes, &wants, &places, &from_nos, &cand_keys, &cand_phys,
                          &count)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n, n_wants, n_places, n_from, capacity, n_phys;
    if (!mq_int64s(&hashes, &n) || !mq_int64s(&wants, &n_wants) || !mq_int64s(&places, &n_places) ||
        !mq_int64s(&from_nos, &n_from) || !mq_int64s(&cand_keys, &capacity) || !mq_int64s(&cand_phys, &n_phys)) {
        goto done;
    }
    if (n_wants != n || n_places != n || n_from != n || n_phys != capacity) {
        PyErr_SetString(PyExc_ValueError, "hashes, wants, places and from_nos, or the candidate columns, differ in length");
        goto done;
    }
    if (header.len != HEADER_SIZE || slots.len % 4 != 0 || slots.len == 0 || entries.len % ENTRY_SIZE != 0) {
        PyErr_SetString(PyExc_ValueError, "header, slots or entries are not an index file's");
        goto done;
    }
    if (file_pos < 0 || file_pos >= file_count || count < 0 || count > capacity) {
        PyErr_Format(PyExc_ValueError, "file %lld of %lld, or %lld candidates of room for %zd", file_pos, file_count,
                     count, capacity);
        goto done;
    }
    int64_t *want = wants.buf, *place = places.buf, *from = from_nos.buf;
    int64_t room = capacity - count;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (want[i] < 0 || want[i] > (1 << 24) || from[i] < 0) {
            PyErr_Format(PyExc_ValueError, "key %zd wants %lld offsets from entry %lld", i, (long long)want[i],
                         (long long)from[i]);
            goto done;
        }
        if (want[i] > 0 && place[i] == file_pos && walk) {
            room -= want[i];
        }
    }
    if (room < 0) {
        PyErr_SetString(PyExc_ValueError, "the candidate columns have no room for the offsets the keys want");
        goto done;
    }
    const int64_t *hash = hashes.buf;
    int64_t *keys_out = cand_keys.buf, *phys_out = cand_phys.buf;
    const uint8_t *head = header.buf;
    int64_t index_count = mq_be32(head + 36), file_begin_ms = mq_be64(head);
    Py_ssize_t wanting = 0;
    MQ_BEGIN_ALLOW_THREADS_IF((capacity - room - count) * ENTRY_SIZE)
    for (Py_ssize_t i = 0; i < n; i++) {
        if (want[i] > 0 && place[i] == file_pos) {
            int64_t next_no = 0, got = 0;
            if (walk) {
                /* a Java hash read as the index's; one already is (a non-negative int32) */
                int64_t key_hash = mq_index_hash((uint32_t)hash[i]);
                got = walk_chain(slots.buf, slots.len / 4, entries.buf, entries.len / ENTRY_SIZE, index_count,
                                 file_begin_ms, key_hash, want[i], from[i], begin_ms, end_ms, phys_out + count,
                                 &next_no);
                for (int64_t j = 0; j < got; j++) {
                    keys_out[count + j] = (int64_t)i;
                }
                count += got;
                want[i] -= got;
            }
            place[i] = next_no ? file_pos : file_pos + 1;
            from[i] = next_no;
        }
        if (stop && place[i] > file_pos) {  /* queryOffset walks no file older than one begun before begin_ms */
            place[i] = file_count;
        }
        wanting += want[i] > 0;
    }
    MQ_END_ALLOW_THREADS_IF
    if (stop) {
        wanting = 0;
    }
    result = Py_BuildValue("(Ln)", count, wanting);
done:
    PyBuffer_Release(&header);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&wants);
    PyBuffer_Release(&places);
    PyBuffer_Release(&from_nos);
    PyBuffer_Release(&cand_keys);
    PyBuffer_Release(&cand_phys);
    return result;
}
