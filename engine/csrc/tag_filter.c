/* The reader's pass over consume-queue entries for a pull (engine/lookup.py get_messages): which entries
 * the tag filter keeps, up to the pull's count and byte limits, in one call. Entries are the consume
 * queue's 20-byte rows (engine/consumequeue/consume_queue.py has the byte table). */
#include "kernels.h"

#define CQ_ENTRY_SIZE 20

static int code_wanted(int64_t code, const int64_t *codes, Py_ssize_t n_codes) {
    if (n_codes == 0) {
        return 1;
    }
    for (Py_ssize_t k = 0; k < n_codes; k++) {
        if (codes[k] == code) {
            return 1;
        }
    }
    return 0;
}

PyObject *mq_pull_rows(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer entries, codes, rows;
    long long readable_end, max_bytes, total_bytes;
    Py_ssize_t max_count, count, first_row;
    if (!PyArg_ParseTuple(args, "y*y*LnLnLnw*", &entries, &codes, &readable_end, &max_count, &max_bytes, &count,
                          &total_bytes, &first_row, &rows)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n_codes, room;
    if (!mq_int64s(&codes, &n_codes) || !mq_int64s(&rows, &room)) {
        goto done;
    }
    if (entries.len % CQ_ENTRY_SIZE != 0) {
        PyErr_SetString(PyExc_ValueError, "entries are not whole 20-byte consume-queue entries");
        goto done;
    }
    Py_ssize_t n_entries = entries.len / CQ_ENTRY_SIZE;
    if (first_row < 0 || first_row > n_entries || count < 0) {
        PyErr_Format(PyExc_ValueError, "first row %zd of %zd entries, count %zd", first_row, n_entries, count);
        goto done;
    }
    if (room < (max_count - count > 1 ? max_count - count : 1)) {
        PyErr_Format(PyExc_ValueError, "rows has room for %zd of the %zd entries the pull may keep", room,
                     max_count - count);
        goto done;
    }
    const uint8_t *entry = (const uint8_t *)entries.buf + (Py_ssize_t)CQ_ENTRY_SIZE * first_row;
    const int64_t *wanted = codes.buf;
    int64_t *kept = rows.buf;
    Py_ssize_t n_kept = 0, filtered = 0, next_row = first_row;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = first_row; i < n_entries; i++, entry += CQ_ENTRY_SIZE) {
        int64_t phys_offset = mq_be64(entry), size = mq_be32(entry + 8);
        if (phys_offset > readable_end - size) {
            break;
        }
        if (count && (count + 1 > max_count || total_bytes + size > max_bytes)) {
            break;
        }
        next_row = i + 1;
        if (!code_wanted(mq_be64(entry + 12), wanted, n_codes)) {
            filtered++;
            continue;
        }
        kept[n_kept++] = i;
        count++;
        total_bytes += size;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nnn)", n_kept, filtered, next_row);
done:
    PyBuffer_Release(&entries);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&rows);
    return result;
}
