/* Consume-queue entries of a batch of dispatch rows (engine/consumequeue/store.py dispatch_rows):
 * the rows that get an entry, grouped by queue in ascending (topic << 32 | queue_id) order, in
 * commitlog order within each queue, as 20-byte big-endian entries (phys offset, size, tags code),
 * and a row of QUEUE_FIELDS numbers per queue: what the store needs to append the queue's run of
 * entries with no further look at them (where they lie, which queue offsets and commitlog bytes they
 * cover). */
#include <stdlib.h>

#include "bigendian.h"
#include "dispatch.h"
#include "record.h"
#include "kernels.h"

/* a queue's row in the queues output: topic code, queue id, its entries [first, end), the queue
 * offset of its first entry and the one after its last, its first entry's phys offset, and the
 * commitlog byte after its last entry's record */
enum { Q_TOPIC, Q_QUEUE_ID, Q_FIRST, Q_END, Q_FIRST_QUEUE_OFFSET, Q_END_QUEUE_OFFSET, Q_FIRST_PHYS, Q_PHYS_END,
       QUEUE_FIELDS };

typedef struct {
    int64_t key;    /* topic << 32 | queue_id, as numpy computes it in int64 */
    int64_t count;  /* rows of the queue; then where its entries start */
    Py_ssize_t first;  /* its first row */
    int64_t *out;      /* its row of the queues output, once the queues are in order */
} Queue;

static int by_key(const void *a, const void *b) {
    int64_t x = (*(Queue *const *)a)->key, y = (*(Queue *const *)b)->key;
    return (x > y) - (x < y);
}

PyObject *mq_cq_entries(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer rows, entries, queue_offsets, queues;
    if (!PyArg_ParseTuple(args, "y*w*w*w*", &rows, &entries, &queue_offsets, &queues)) {
        return NULL;
    }
    PyObject *result = NULL;
    Queue *table = NULL, **sorted = NULL;
    int64_t *slot_of = NULL;
    Py_ssize_t n = rows.len / ROW_SIZE_BYTES, n_offsets, n_queues;
    if (rows.len % ROW_SIZE_BYTES) {
        PyErr_SetString(PyExc_ValueError, "rows are not whole dispatch rows");
        goto done;
    }
    if (!mq_int64s(&queue_offsets, &n_offsets) || !mq_int64s(&queues, &n_queues)) {
        goto done;
    }
    if (entries.len != n * 20 || n_offsets != n || n_queues != QUEUE_FIELDS * n) {
        PyErr_SetString(PyExc_ValueError, "outputs are not sized for the rows");
        goto done;
    }
    size_t mask = mq_table_mask(n);
    table = malloc((mask + 1) * sizeof *table);
    slot_of = malloc(((size_t)n + 1) * sizeof *slot_of);
    sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    if (table == NULL || slot_of == NULL || sorted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *row = rows.buf;
    int64_t min_phys = INT64_MAX, n_entries = 0, n_groups = 0;
    int64_t *offsets_out = queue_offsets.buf, *queues_out = queues.buf;
    uint8_t *out = entries.buf;
    MQ_BEGIN_ALLOW_THREADS_IF(rows.len)
    for (size_t i = 0; i <= mask; i++) {
        table[i].count = -1;
    }
    for (Py_ssize_t r = 0; r < n; r++) {  /* which queue each row goes to, and how many each gets */
        const uint8_t *at = row + r * ROW_SIZE_BYTES;
        int32_t tx = mq_row_i32(at, ROW_SYS_FLAG) & SYSFLAG_TX_MASK;
        if (tx != 0 && tx != SYSFLAG_TX_COMMIT) {
            slot_of[r] = -1;
            continue;
        }
        int64_t key = ((int64_t)mq_row_u16(at, ROW_TOPIC) << 32) | (int64_t)mq_row_i32(at, ROW_QUEUE_ID);
        size_t i = mq_probe_start((uint64_t)key, mask);
        while (table[i].count != -1 && table[i].key != key) {
            i = (i + 1) & mask;
        }
        if (table[i].count == -1) {
            table[i].key = key;
            table[i].count = 0;
            table[i].first = r;
            sorted[n_groups++] = &table[i];
        }
        table[i].count++;
        slot_of[r] = (int64_t)i;
        int64_t phys = mq_row_i64(at, ROW_PHYS_OFFSET);
        min_phys = phys < min_phys ? phys : min_phys;
        n_entries++;
    }
    qsort(sorted, (size_t)n_groups, sizeof *sorted, by_key);
    int64_t start = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        Queue *q = sorted[g];
        int64_t *out_q = queues_out + g * QUEUE_FIELDS;
        out_q[Q_TOPIC] = mq_row_u16(row + q->first * ROW_SIZE_BYTES, ROW_TOPIC);
        out_q[Q_QUEUE_ID] = mq_row_i32(row + q->first * ROW_SIZE_BYTES, ROW_QUEUE_ID);
        out_q[Q_FIRST] = start;
        out_q[Q_END] = start + q->count;
        q->out = out_q;
        int64_t count = q->count;
        q->count = start;
        start += count;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        if (slot_of[r] < 0) {
            continue;
        }
        const uint8_t *at = row + r * ROW_SIZE_BYTES;
        int64_t k = table[slot_of[r]].count++;
        uint8_t *e = out + k * 20;
        mq_put_be64(e, (uint64_t)mq_row_i64(at, ROW_PHYS_OFFSET));
        mq_put_be32(e + 8, (uint32_t)mq_row_i32(at, ROW_SIZE));
        mq_put_be64(e + 12, (uint64_t)mq_row_i64(at, ROW_TAGS_CODE));
        offsets_out[k] = mq_row_i64(at, ROW_QUEUE_OFFSET);
        int64_t *out_q = table[slot_of[r]].out;
        if (k == out_q[Q_FIRST]) {
            out_q[Q_FIRST_QUEUE_OFFSET] = offsets_out[k];
            out_q[Q_FIRST_PHYS] = mq_row_i64(at, ROW_PHYS_OFFSET);
        }
        /* a queue's rows come in commitlog order: its last entry is written last (the sums wrap as
         * int64 where a hostile row's would overflow: the store then takes the entry-by-entry path) */
        uint64_t phys_end = (uint64_t)mq_row_i64(at, ROW_PHYS_OFFSET) + (uint64_t)(int64_t)mq_row_i32(at, ROW_SIZE);
        out_q[Q_END_QUEUE_OFFSET] = (int64_t)((uint64_t)offsets_out[k] + 1u);
        out_q[Q_PHYS_END] = (int64_t)phys_end;
    }
    MQ_END_ALLOW_THREADS_IF
    result = Py_BuildValue("LLL", (long long)n_groups, (long long)n_entries, (long long)min_phys);
done:
    free(table);
    free(slot_of);
    free(sorted);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&queue_offsets);
    PyBuffer_Release(&queues);
    return result;
}
