/* pymtok._native.MtokTables: a .mtok model section validated and indexed in place.
 *
 * The reader (pymtok/mtok.py) hands over the file's buffer and where the vocabulary records
 * start; this checks every record (bounds, UTF-8, ids, duplicates) and every merge (ids that
 * exist, a result token that exists) with errors naming section and byte offset, and builds the
 * index of mtok_tables.h. Python sees the vocabulary through it (token -> id, id -> token) and
 * the native encoder reads it directly; nothing is copied into per-token Python objects unless
 * asked for (tokens(), merge_table(): the pure-Python path's dicts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mtok_tables.h"

enum { KIND_BPE, KIND_WORDPIECE };

typedef struct {
    PyObject_HEAD
    Py_buffer buf;   /* keeps the file (an mmap) alive and unmovable while the index points into it */
    MtokIndex x;
    size_t vocab_pos, merges_pos; /* absolute offsets, for error messages */
    Py_ssize_t end;  /* the offset after the model's records */
    int kind;
    int resolved;    /* merges' result tokens known (always, for WordPiece) */
} Tables;

static PyTypeObject TablesType;

int mtok_tables_check(PyObject *o) { return PyObject_TypeCheck(o, &TablesType); }

/* FormatError("<section> at byte <at>: <message>"); mtok.py puts the file name in front. */
static void format_error(const char *section, size_t at, const char *fmt, ...) {
    PyObject *errors = PyImport_ImportModule("pymtok.errors");
    PyObject *cls = errors ? PyObject_GetAttrString(errors, "FormatError") : NULL;
    Py_XDECREF(errors);
    if (!cls)
        return;
    char message[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    PyErr_Format(cls, "%s at byte %zu: %s", section, at, message);
    Py_DECREF(cls);
}

/* The offset of the first byte of the first invalid sequence (as Python's strict decoder
 * reports it), or n when s is valid UTF-8. */
static size_t utf8_invalid_at(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF)
            k = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            k = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            k = 3, cp = c & 0x07;
        else
            return i;
        if (n - i - 1 < k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return i;
        i += k + 1;
    }
    return n;
}

static size_t pow2_for(size_t n) {
    size_t p = 16;
    while (p < n + n / 2 + 1) /* load below 2/3 */
        p *= 2;
    return p;
}

/* The record of an id: its offset + 1 in the vocabulary, or 0. */
static uint32_t record_of(const MtokIndex *x, uint32_t id) {
    if (id < x->nby_id)
        return x->by_id[id];
    size_t lo = 0, hi = x->sparse ? x->count : 0;
    while (lo < hi && x->sparse) {
        size_t mid = (lo + hi) / 2;
        uint32_t at = (uint32_t)(x->sparse[mid] >> 32);
        if (at == id)
            return (uint32_t)x->sparse[mid] + 1;
        if (at < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ids below this bound are indexed by a table, those above (legal but sparse: a fuzzer's or a
 * hand-made file's 2^31 - 1) by a sorted array: memory follows the record count, not the ids. */
static size_t dense_bound(uint32_t count) { return 2 * (size_t)count + 1024; }

static int index_vocab(Tables *t, const uint8_t *base, size_t size) {
    MtokIndex *x = &t->x;
    const char *section = "model vocabulary";
    size_t pos = t->vocab_pos, nsparse = 0;
    x->vocab = base + pos;
    x->nby_id = dense_bound(x->count);
    x->by_id = calloc(x->nby_id, sizeof *x->by_id);
    x->mask = pow2_for(x->count) - 1;
    x->slots = calloc(x->mask + 1, sizeof *x->slots);
    if (!x->by_id || !x->slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t k = 0; k < x->count; k++) {
        size_t at = pos;
        if (size - pos < 2) {
            format_error(section, at, "vocabulary record is truncated");
            return -1;
        }
        size_t len = mtok_u16(base + pos);
        if (size - pos - 2 < len + x->tail) {
            format_error(section, at, "vocabulary record is truncated");
            return -1;
        }
        const uint8_t *token = base + pos + 2;
        size_t bad = utf8_invalid_at(token, len);
        if (bad < len) {
            format_error(section, at + 2 + bad, "vocabulary token is not valid UTF-8");
            return -1;
        }
        uint32_t id = mtok_u32(token + len);
        if (id > INT32_MAX) {
            format_error(section, at, "vocabulary id %u is not a valid token id", id);
            return -1;
        }
        pos += 2 + len + x->tail;
        if (pos - t->vocab_pos > UINT32_MAX - 1) {
            format_error(section, at, "the vocabulary section is larger than 4 GiB");
            return -1;
        }
        uint32_t off = (uint32_t)(at - t->vocab_pos);
        uint64_t h = hash_bytes(token, len);
        size_t i = (size_t)(h >> 32) & x->mask;
        for (uint32_t s; (s = x->slots[i]); i = (i + 1) & x->mask) {
            const uint8_t *r = x->vocab + s - 1;
            if (mtok_u16(r) == len && bytes_eq(r + 2, token, len)) {
                format_error(section, at, "the vocabulary lists a token twice");
                return -1;
            }
        }
        x->slots[i] = off + 1;
        if (len > x->max_len)
            x->max_len = len;
        if ((int32_t)id > x->max_id)
            x->max_id = (int32_t)id;
        if (id < x->nby_id) {
            if (x->by_id[id]) {
                format_error(section, at, "vocabulary id %u is given to two tokens", id);
                return -1;
            }
            x->by_id[id] = off + 1;
        } else {
            if (!x->sparse && !(x->sparse = malloc(x->count * sizeof *x->sparse))) {
                PyErr_NoMemory();
                return -1;
            }
            x->sparse[nsparse++] = (uint64_t)id << 32 | off;
        }
    }
    x->vocab_len = pos - t->vocab_pos;
    if (x->sparse) {
        qsort(x->sparse, nsparse, sizeof *x->sparse, cmp_u64);
        for (size_t k = 1; k < nsparse; k++)
            if (x->sparse[k] >> 32 == x->sparse[k - 1] >> 32) {
                format_error(section, pos, "vocabulary id %u is given to two tokens", (unsigned)(x->sparse[k] >> 32));
                return -1;
            }
        /* record_of searches count entries: pad with ids no record has */
        for (size_t k = nsparse; k < x->count; k++)
            x->sparse[k] = UINT64_MAX;
    }
    t->end = (Py_ssize_t)pos;
    return 0;
}

/* Stable order of merges by the file's rank: HF's rank is the position in that order. */
static const uint8_t *sort_base;
static int cmp_rank(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t ri = mtok_u32(sort_base + 12 * (size_t)i + 8), rj = mtok_u32(sort_base + 12 * (size_t)j + 8);
    return ri != rj ? (ri < rj ? -1 : 1) : (i < j ? -1 : i > j);
}

static uint32_t rank_of(const MtokIndex *x, uint32_t k) {
    return x->rank ? x->rank[k] : mtok_u32(x->merges + 12 * (size_t)k + 8);
}

static int index_merges(Tables *t, const uint8_t *base, size_t size) {
    MtokIndex *x = &t->x;
    const char *section = "merges";
    size_t n = x->nmerges;
    t->merges_pos = (size_t)t->end;
    if ((size - t->merges_pos) / 12 < n) {
        format_error(section, t->merges_pos, "%zu merges need %zu bytes but only %zu remain (truncated?)", n, 12 * n,
                     size - t->merges_pos);
        return -1;
    }
    x->merges = base + t->merges_pos;
    uint8_t *seen = calloc(n / 8 + 1, 1);
    x->merged = malloc((n ? n : 1) * sizeof *x->merged);
    x->mmask = pow2_for(n) - 1;
    x->mslots = calloc(x->mmask + 1, sizeof *x->mslots);
    if (!seen || !x->merged || !x->mslots) {
        free(seen);
        PyErr_NoMemory();
        return -1;
    }
    int permutation = 1;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *m = x->merges + 12 * k;
        uint32_t a = mtok_u32(m), b = mtok_u32(m + 4), rank = mtok_u32(m + 8);
        if (!record_of(x, a) || !record_of(x, b)) {
            free(seen);
            format_error(section, t->merges_pos + 12 * k, "merge (%u, %u) names id %u, which is not in the vocabulary",
                         a, b, record_of(x, a) ? b : a);
            return -1;
        }
        if (rank >= n || seen[rank / 8] >> (rank % 8) & 1)
            permutation = 0;
        else
            seen[rank / 8] |= (uint8_t)(1u << (rank % 8));
    }
    free(seen);
    if (!permutation) {
        /* unusual ranks are ordered (stable for equal ones), as the pure reader orders them */
        uint32_t *order = malloc(n * sizeof *order);
        x->rank = malloc(n * sizeof *x->rank);
        if (!order || !x->rank) {
            free(order);
            PyErr_NoMemory();
            return -1;
        }
        for (uint32_t k = 0; k < n; k++)
            order[k] = k;
        sort_base = x->merges;
        qsort(order, n, sizeof *order, cmp_rank);
        for (uint32_t k = 0; k < n; k++)
            x->rank[order[k]] = k;
        free(order);
    }
    for (uint32_t k = 0; k < n; k++) {
        const uint8_t *m = x->merges + 12 * (size_t)k;
        uint32_t a = mtok_u32(m), b = mtok_u32(m + 4);
        size_t i = mtok_pair_hash(a, b) & x->mmask;
        for (uint32_t s; (s = x->mslots[i]); i = (i + 1) & x->mmask) {
            const uint8_t *o = x->merges + 12 * (size_t)(s - 1);
            if (mtok_u32(o) == a && mtok_u32(o + 4) == b)
                break;
        }
        /* a pair listed twice: the later merge in HF's order wins, as in HF's map */
        if (!x->mslots[i] || rank_of(x, x->mslots[i] - 1) < rank_of(x, k))
            x->mslots[i] = k + 1;
    }
    t->end = (Py_ssize_t)(t->merges_pos + 12 * n);
    return 0;
}

static void Tables_dealloc(Tables *self) {
    MtokIndex *x = &self->x;
    free(x->slots);
    free(x->by_id);
    free(x->sparse);
    free(x->mslots);
    free(x->merged);
    free(x->rank);
    if (self->buf.obj)
        PyBuffer_Release(&self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* MtokTables(data, pos, kind, count, merge_count=0): validate and index the records from pos. */
static int Tables_init(Tables *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"data", "pos", "kind", "count", "merge_count", NULL};
    Py_ssize_t pos;
    const char *kind;
    unsigned int count, nmerges = 0;
    if (self->buf.obj) {
        PyErr_SetString(PyExc_RuntimeError, "MtokTables is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nsI|I", kwlist, &self->buf, &pos, &kind, &count, &nmerges))
        return -1;
    if (strcmp(kind, "BPE") == 0)
        self->kind = KIND_BPE;
    else if (strcmp(kind, "WordPiece") == 0)
        self->kind = KIND_WORDPIECE;
    else {
        PyErr_Format(PyExc_ValueError, "no native tables for %s", kind);
        return -1;
    }
    if (pos < 0 || pos > self->buf.len) {
        PyErr_SetString(PyExc_ValueError, "pos lies outside the data");
        return -1;
    }
    self->x.count = count;
    self->x.tail = 4;
    self->x.max_id = -1;
    self->x.nmerges = self->kind == KIND_BPE ? nmerges : 0;
    self->vocab_pos = (size_t)pos;
    const uint8_t *base = self->buf.buf;
    if (index_vocab(self, base, (size_t)self->buf.len) < 0 ||
        (self->kind == KIND_BPE && index_merges(self, base, (size_t)self->buf.len) < 0))
        return -1;
    self->resolved = self->kind != KIND_BPE;
    return 0;
}

static const uint8_t *record(const MtokIndex *x, uint32_t s) { return x->vocab + s - 1; }

/* resolve_merges(skip): find each merge's result, HF's vocab[left + right[skip:]] where skip is
 * the continuing-subword prefix length in characters. */
static PyObject *Tables_resolve_merges(Tables *self, PyObject *arg) {
    Py_ssize_t skip = PyLong_AsSsize_t(arg);
    if (skip == -1 && PyErr_Occurred())
        return NULL;
    MtokIndex *x = &self->x;
    uint8_t *key = malloc(2 * 0xFFFF + 1);
    if (!key)
        return PyErr_NoMemory();
    for (uint32_t k = 0; k < x->nmerges; k++) {
        const uint8_t *m = x->merges + 12 * (size_t)k;
        const uint8_t *a = record(x, record_of(x, mtok_u32(m))), *b = record(x, record_of(x, mtok_u32(m + 4)));
        size_t la = mtok_u16(a), lb = mtok_u16(b), from = 0;
        for (Py_ssize_t c = 0; c < skip && from < lb; c++)
            do
                from++;
            while (from < lb && (b[2 + from] & 0xC0) == 0x80);
        memcpy(key, a + 2, la);
        memcpy(key + la, b + 2 + from, lb - from);
        int32_t id = mtok_token_id(x, key, la + lb - from);
        if (id < 0) {
            free(key);
            format_error("merges", self->merges_pos + 12 * (size_t)k,
                         "merge (%u, %u) makes a token that is not in the vocabulary", mtok_u32(m), mtok_u32(m + 4));
            return NULL;
        }
        x->merged[k] = id;
    }
    free(key);
    self->resolved = 1;
    Py_RETURN_NONE;
}

static PyObject *token_str(const uint8_t *r) {
    return PyUnicode_DecodeUTF8((const char *)r + 2, (Py_ssize_t)mtok_u16(r), "strict");
}

static Py_ssize_t Tables_len(Tables *self) { return (Py_ssize_t)self->x.count; }

/* get(token) -> int | None */
static PyObject *Tables_get(Tables *self, PyObject *token) {
    Py_ssize_t n;
    const char *s = PyUnicode_Check(token) ? PyUnicode_AsUTF8AndSize(token, &n) : NULL;
    if (!s) {
        PyErr_Clear(); /* not a str, or a lone surrogate: no token is that */
        Py_RETURN_NONE;
    }
    int32_t id = mtok_token_id(&self->x, (const uint8_t *)s, (size_t)n);
    if (id < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(id);
}

/* token(id) -> str | None */
static PyObject *Tables_token(Tables *self, PyObject *arg) {
    long long id = PyLong_AsLongLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    uint32_t s = id >= 0 && id <= INT32_MAX ? record_of(&self->x, (uint32_t)id) : 0;
    if (!s)
        Py_RETURN_NONE;
    return token_str(record(&self->x, s));
}

/* tokens() -> list[str], ids() -> list[int]: the records in file order */
static PyObject *Tables_records(Tables *self, int want_ids) {
    const MtokIndex *x = &self->x;
    PyObject *list = PyList_New((Py_ssize_t)x->count);
    size_t pos = 0;
    for (uint32_t k = 0; list && k < x->count; k++) {
        const uint8_t *r = x->vocab + pos;
        size_t len = mtok_u16(r);
        PyObject *o = want_ids ? PyLong_FromUnsignedLong(mtok_u32(r + 2 + len)) : token_str(r);
        if (!o)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k, o);
        pos += 2 + len + x->tail;
    }
    return list;
}

static PyObject *Tables_tokens(Tables *self, PyObject *unused) {
    (void)unused;
    return Tables_records(self, 0);
}

static PyObject *Tables_ids(Tables *self, PyObject *unused) {
    (void)unused;
    return Tables_records(self, 1);
}

/* merges() -> list[tuple[int, int]]: (left id, right id) in HF's order */
static PyObject *Tables_merges(Tables *self, PyObject *unused) {
    (void)unused;
    const MtokIndex *x = &self->x;
    PyObject *list = PyList_New((Py_ssize_t)x->nmerges);
    for (uint32_t k = 0; list && k < x->nmerges; k++) {
        const uint8_t *m = x->merges + 12 * (size_t)k;
        uint32_t rank = rank_of(x, k);
        PyObject *pair = Py_BuildValue("(kk)", (unsigned long)mtok_u32(m), (unsigned long)mtok_u32(m + 4));
        if (!pair || rank >= x->nmerges || PyList_GET_ITEM(list, rank)) {
            /* ranks are a permutation of 0..n-1 or were made one (index_merges) */
            Py_XDECREF(pair);
            Py_CLEAR(list);
            PyErr_SetString(PyExc_SystemError, "merge ranks are not a permutation");
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)rank, pair);
    }
    return list;
}

/* merge_table() -> dict[(left, right), (rank, merged)]: models.BPE's MergeTable */
static PyObject *Tables_merge_table(Tables *self, PyObject *unused) {
    (void)unused;
    const MtokIndex *x = &self->x;
    if (!self->resolved) {
        PyErr_SetString(PyExc_RuntimeError, "resolve_merges() first");
        return NULL;
    }
    PyObject *table = PyDict_New();
    for (size_t i = 0; table && i <= x->mmask; i++) {
        uint32_t s = x->mslots[i];
        if (!s)
            continue;
        const uint8_t *m = x->merges + 12 * (size_t)(s - 1);
        PyObject *key = Py_BuildValue("(kk)", (unsigned long)mtok_u32(m), (unsigned long)mtok_u32(m + 4));
        PyObject *value = Py_BuildValue("(kl)", (unsigned long)rank_of(x, s - 1), (long)x->merged[s - 1]);
        if (!key || !value || PyDict_SetItem(table, key, value) < 0)
            Py_CLEAR(table);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return table;
}

static PyObject *Tables_get_end(Tables *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->end);
}

static PyObject *Tables_get_max_id(Tables *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->x.max_id);
}

static PyMethodDef Tables_methods[] = {
    {"get", (PyCFunction)Tables_get, METH_O, "get(token) -> int | None"},
    {"token", (PyCFunction)Tables_token, METH_O, "token(id) -> str | None"},
    {"tokens", (PyCFunction)Tables_tokens, METH_NOARGS, "tokens() -> list[str], in file order"},
    {"ids", (PyCFunction)Tables_ids, METH_NOARGS, "ids() -> list[int], in file order"},
    {"merges", (PyCFunction)Tables_merges, METH_NOARGS, "merges() -> list[(left id, right id)] in rank order"},
    {"merge_table", (PyCFunction)Tables_merge_table, METH_NOARGS,
     "merge_table() -> {(left, right): (rank, merged)}, models.BPE's MergeTable"},
    {"resolve_merges", (PyCFunction)Tables_resolve_merges, METH_O,
     "resolve_merges(skip): each merge's result token, skipping skip characters of the right side"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Tables_getset[] = {
    {"end", (getter)Tables_get_end, NULL, "the offset after the model's records", NULL},
    {"max_id", (getter)Tables_get_max_id, NULL, "the largest vocabulary id (-1 when empty)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Tables_as_sequence = {.sq_length = (lenfunc)Tables_len};

static PyTypeObject TablesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.MtokTables",
    .tp_basicsize = sizeof(Tables),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Tables_init,
    .tp_dealloc = (destructor)Tables_dealloc,
    .tp_methods = Tables_methods,
    .tp_getset = Tables_getset,
    .tp_as_sequence = &Tables_as_sequence,
    .tp_doc = "MtokTables(data, pos, kind, count, merge_count=0): a .mtok model section indexed in place.",
};

int mtok_tables_register(PyObject *module) {
    if (PyType_Ready(&TablesType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "MtokTables", (PyObject *)&TablesType);
}

/* ---- what the native encoder takes from the tables -------------------------------------- */

/* GPT-2's byte -> character map (pymtok.byte_level), as the UTF-8 of each byte's character:
 * byte-level vocabularies hold tokens in those characters. */
static uint8_t gpt2_utf8[256][2], gpt2_len[256];

static void init_gpt2(void) {
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t c = printable ? (uint32_t)b : 0x100u + (uint32_t)extra++;
        if (c < 0x80) {
            gpt2_utf8[b][0] = (uint8_t)c;
            gpt2_len[b] = 1;
        } else {
            gpt2_utf8[b][0] = (uint8_t)(0xC0 | c >> 6);
            gpt2_utf8[b][1] = (uint8_t)(0x80 | (c & 0x3F));
            gpt2_len[b] = 2;
        }
    }
}

int32_t mtok_byte_level_id(const MtokIndex *x, const uint8_t *b, size_t n) {
    if (n > x->max_len)
        return -1; /* each byte is at least one byte of the token */
    uint8_t stack[512], *key = n <= sizeof stack / 2 ? stack : malloc(2 * n);
    if (!key)
        return -1;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(key + w, gpt2_utf8[b[i]], gpt2_len[b[i]]);
        w += gpt2_len[b[i]];
    }
    int32_t id = mtok_token_id(x, key, w);
    if (key != stack)
        free(key);
    return id;
}

static Tables *ready_tables(PyObject *tables) {
    Tables *t = (Tables *)tables;
    if (!t->resolved) {
        PyErr_SetString(PyExc_ValueError, "MtokTables.resolve_merges() must run before encoding");
        return NULL;
    }
    return t;
}

int mtok_build_bpe(BPE *m, PyObject *tables, int32_t *max_id) {
    Tables *t = ready_tables(tables);
    if (!t)
        return -1;
    const MtokIndex *x = &t->x;
    if (t->kind != KIND_BPE) {
        PyErr_SetString(PyExc_ValueError, "BPE needs BPE tables");
        return -1;
    }
    m->mtok = x;
    if (x->max_id > *max_id)
        *max_id = x->max_id;
    if (!gpt2_len[0])
        init_gpt2();
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->fallback[b] = mtok_token_id(x, (const uint8_t *)name, 6);
        m->byte_unit[b] = m->byte_level ? mtok_token_id(x, gpt2_utf8[b], gpt2_len[b]) : -1;
    }
    if (m->byte_level)
        return 0;
    m->bmp = malloc(0x10000 * sizeof *m->bmp);
    if (!m->bmp) {
        PyErr_NoMemory();
        return -1;
    }
    memset(m->bmp, 0xFF, 0x10000 * sizeof *m->bmp);
    /* single BMP characters, and whether some token has U+2581 right after another character
     * (then pieces may not be cut before U+2581: see build_bpe in module.c) */
    int metaspace_inside = 0;
    size_t pos = 0;
    for (uint32_t k = 0; k < x->count; k++) {
        const uint8_t *r = x->vocab + pos, *s = r + 2;
        size_t len = mtok_u16(r);
        int32_t id = (int32_t)mtok_u32(s + len);
        if (len == 1)
            m->bmp[s[0]] = id;
        else if (len == 2 && s[0] >= 0xC0 && s[0] < 0xE0)
            m->bmp[(s[0] & 0x1Fu) << 6 | (s[1] & 0x3Fu)] = id;
        else if (len == 3 && s[0] >= 0xE0 && s[0] < 0xF0)
            m->bmp[(s[0] & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu)] = id;
        for (size_t i = 1; !metaspace_inside && i + 2 < len; i++)
            if (s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81 &&
                !(i >= 3 && s[i - 3] == 0xE2 && s[i - 2] == 0x96 && s[i - 1] == 0x81))
                metaspace_inside = 1;
        pos += 2 + len + x->tail;
    }
    m->split_metaspace = !m->ignore_merges && !metaspace_inside && m->bmp[0x2581] >= 0;
    return 0;
}

int mtok_build_wordpiece(WordPiece *m, PyObject *tables, PyObject *prefix, int32_t *max_id) {
    Tables *t = ready_tables(tables);
    Py_ssize_t plen;
    const char *p = t ? PyUnicode_AsUTF8AndSize(prefix, &plen) : NULL;
    if (!p)
        return -1;
    const MtokIndex *x = &t->x;
    if (x->max_id > *max_id)
        *max_id = x->max_id;
    if (strmap_init(&m->vocab, x->count) < 0 || strmap_init(&m->cont, x->count) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    size_t pos = 0;
    for (uint32_t k = 0; k < x->count; k++) {
        const uint8_t *r = x->vocab + pos, *s = r + 2;
        size_t len = mtok_u16(r);
        int32_t id = (int32_t)mtok_u32(s + len);
        if (strmap_put(&m->vocab, s, len, id) < 0 ||
            (len >= (size_t)plen && memcmp(s, p, (size_t)plen) == 0 &&
             strmap_put(&m->cont, s + plen, len - (size_t)plen, id) < 0)) {
            PyErr_NoMemory();
            return -1;
        }
        pos += 2 + len + x->tail;
    }
    return 0;
}
