/* pymtok._native: the Python face of the native core.
 *
 * Two types, built once per tokenizer (pymtok/native.py decides when the native path is exact
 * and builds them):
 *  - Encoder, from the model's tables and a description of the pre-tokenizer:
 *    Encoder.encode(normalized_segment, offset) returns the ids of one segment, and
 *    Encoder.encode_text(text, normalizer) those of a whole text, added tokens (set_added)
 *    matched and each segment between them normalized, in one call;
 *  - Normalizer, a BertNormalizer, NFC or Precompiled: calling it normalizes a str.
 * The work runs with the GIL released so that threads encode in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "mtok_tables.h"

enum { MODEL_BPE, MODEL_WORDPIECE, MODEL_UNIGRAM };
#define MAX_STEPS 16
#define CACHE_SLOTS (1u << 18)
#define CACHE_ENTRIES 100000
#define INTS_MAX (1u << 20)

typedef struct {
    PyObject_HEAD
    int model;
    BPE bpe;
    WordPiece wp;
    Unigram ug;
    Step steps[MAX_STEPS];
    size_t nsteps;
    Cache cache;
    PyObject **ints; /* a Python int for every id the model can produce: lists are built fast */
    size_t nints;
    AddedTrie raw, norm; /* added tokens matched before / after normalization (set_added) */
    PyObject *tables;    /* a .mtok's MtokTables the model reads in place, kept alive here */
} Encoder;

/* ---- reading Python tables -------------------------------------------------------------- */

/* GPT-2's byte <-> character map (pymtok.byte_level): character -> byte, -1 if not a byte's. */
static int16_t gpt2_byte_of[0x144];

static void init_gpt2_map(void) {
    for (size_t i = 0; i < 0x144; i++)
        gpt2_byte_of[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        gpt2_byte_of[printable ? b : 0x100 + extra++] = (int16_t)b;
    }
}

typedef struct {
    uint8_t *v;
    size_t cap;
} Bytes;

/* The bytes a vocabulary string stands for: its UTF-8, or for byte-level vocabularies the
 * bytes its GPT-2 characters map back to. Returns the length, -1 if a byte-level string holds
 * a character no byte maps to (no input can produce it), -2 on error. */
static Py_ssize_t key_bytes(PyObject *s, int byte_level, Bytes *out) {
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "vocabulary keys must be str");
        return -2;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (out->cap < (size_t)n * 4 + 1) {
        uint8_t *v = realloc(out->v, (size_t)n * 4 + 1);
        if (!v) {
            PyErr_NoMemory();
            return -2;
        }
        out->v = v;
        out->cap = (size_t)n * 4 + 1;
    }
    size_t w = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t c = PyUnicode_READ(kind, data, i);
        if (byte_level) {
            if (c >= 0x144 || gpt2_byte_of[c] < 0)
                return -1;
            out->v[w++] = (uint8_t)gpt2_byte_of[c];
        } else {
            w += utf8_encode(&c, 1, out->v + w);
        }
    }
    return (Py_ssize_t)w;
}

static int read_id(PyObject *o, int32_t *id) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "token id %ld out of range", v);
        return -1;
    }
    *id = (int32_t)v;
    return 0;
}

static void fallback_table(const StrMap *vocab, int32_t *table) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        table[b] = strmap_get(vocab, (const uint8_t *)name, 6);
    }
}

static int build_bpe(Encoder *self, PyObject *vocab, PyObject *merges, int32_t *max_id) {
    BPE *m = &self->bpe;
    if (mtok_tables_check(vocab)) {
        self->tables = Py_NewRef(vocab);
        return mtok_build_bpe(m, vocab, max_id);
    }
    if (!PyDict_Check(vocab) || !PyDict_Check(merges)) {
        PyErr_SetString(PyExc_TypeError, "BPE needs vocab and merges as dicts");
        return -1;
    }
    memset(m->byte_unit, 0xFF, sizeof m->byte_unit);
    if (strmap_init(&m->vocab, (size_t)PyDict_GET_SIZE(vocab)) < 0 ||
        pairmap_init(&m->merges, (size_t)PyDict_GET_SIZE(merges)) < 0)
        goto nomem;
    if (!m->byte_level) {
        m->bmp = malloc(0x10000 * sizeof *m->bmp);
        if (!m->bmp)
            goto nomem;
        memset(m->bmp, 0xFF, 0x10000 * sizeof *m->bmp);
    }
    /* Whether no token has U+2581 right after another character: then no merge can join
     * across such a point and pieces may be cut there (see encode_segment). */
    int metaspace_inside = 0;
    Bytes key = {0};
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(vocab, &pos, &k, &v)) {
        int32_t id;
        Py_ssize_t len = key_bytes(k, m->byte_level, &key);
        if (len == -2 || read_id(v, &id) < 0)
            goto fail;
        if (id > *max_id)
            *max_id = id;
        if (len < 0)
            continue;
        if (strmap_put(&m->vocab, key.v, (size_t)len, id) < 0)
            goto nomem_key;
        if (m->byte_level) {
            if (len == 1)
                m->byte_unit[key.v[0]] = id;
            continue;
        }
        Py_ssize_t chars = PyUnicode_GET_LENGTH(k);
        int kind = PyUnicode_KIND(k);
        const void *data = PyUnicode_DATA(k);
        if (chars == 1 && PyUnicode_READ(kind, data, 0) < 0x10000)
            m->bmp[PyUnicode_READ(kind, data, 0)] = id;
        for (Py_ssize_t i = 1; i < chars; i++)
            if (PyUnicode_READ(kind, data, i) == 0x2581 && PyUnicode_READ(kind, data, i - 1) != 0x2581)
                metaspace_inside = 1;
    }
    free(key.v);
    fallback_table(&m->vocab, m->fallback);
    pos = 0;
    while (PyDict_Next(merges, &pos, &k, &v)) {
        int32_t left, right, rank, id;
        if (!PyTuple_Check(k) || PyTuple_GET_SIZE(k) != 2 || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
            PyErr_SetString(PyExc_TypeError, "merges must map (left id, right id) to (rank, merged id)");
            return -1;
        }
        if (read_id(PyTuple_GET_ITEM(k, 0), &left) < 0 || read_id(PyTuple_GET_ITEM(k, 1), &right) < 0 ||
            read_id(PyTuple_GET_ITEM(v, 0), &rank) < 0 || read_id(PyTuple_GET_ITEM(v, 1), &id) < 0)
            return -1;
        if (id > *max_id)
            *max_id = id;
        pairmap_put(&m->merges, (uint32_t)left, (uint32_t)right, (uint32_t)rank, id);
    }
    m->split_metaspace = !m->byte_level && !m->ignore_merges && !metaspace_inside && m->bmp[0x2581] >= 0;
    return 0;
nomem_key:
    PyErr_NoMemory();
fail:
    free(key.v);
    return -1;
nomem:
    PyErr_NoMemory();
    return -1;
}

static int build_wordpiece(Encoder *self, PyObject *vocab, PyObject *prefix, int32_t *max_id) {
    WordPiece *m = &self->wp;
    if (mtok_tables_check(vocab))
        return mtok_build_wordpiece(m, vocab, prefix, max_id);
    if (!PyDict_Check(vocab)) {
        PyErr_SetString(PyExc_TypeError, "WordPiece needs vocab as a dict");
        return -1;
    }
    Bytes pre = {0}, key = {0};
    Py_ssize_t plen = key_bytes(prefix, 0, &pre);
    if (plen < 0)
        return -1;
    if (strmap_init(&m->vocab, (size_t)PyDict_GET_SIZE(vocab)) < 0 ||
        strmap_init(&m->cont, (size_t)PyDict_GET_SIZE(vocab)) < 0) {
        free(pre.v);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int err = 0;
    while (!err && PyDict_Next(vocab, &pos, &k, &v)) {
        int32_t id;
        Py_ssize_t len = key_bytes(k, 0, &key);
        if (len < 0 || read_id(v, &id) < 0) {
            err = 1;
            break;
        }
        if (id > *max_id)
            *max_id = id;
        if (strmap_put(&m->vocab, key.v, (size_t)len, id) < 0)
            err = 2;
        else if (len >= plen && memcmp(key.v, pre.v, (size_t)plen) == 0 &&
                 strmap_put(&m->cont, key.v + plen, (size_t)(len - plen), id) < 0)
            err = 2;
    }
    free(pre.v);
    free(key.v);
    if (err == 2)
        PyErr_NoMemory();
    return err ? -1 : 0;
}

static int build_unigram(Encoder *self, PyObject *pieces, PyObject *scores) {
    Unigram *m = &self->ug;
    if (!PyList_Check(pieces) || !PyList_Check(scores) || PyList_GET_SIZE(pieces) != PyList_GET_SIZE(scores)) {
        PyErr_SetString(PyExc_TypeError, "Unigram needs pieces and scores as lists of one length");
        return -1;
    }
    size_t n = (size_t)PyList_GET_SIZE(pieces), total = 0;
    for (size_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(pieces, i);
        if (!PyUnicode_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "Unigram pieces must be str");
            return -1;
        }
        total += (size_t)PyUnicode_GET_LENGTH(p) * 4;
    }
    size_t slots = 16;
    while (slots < 2 * total + 1)
        slots *= 2;
    m->trie = malloc(slots * sizeof *m->trie);
    m->scores = malloc((n ? n : 1) * sizeof *m->scores);
    m->nnodes = 1; /* node 0 is the root; 0 as a child means none */
    m->term = malloc(sizeof *m->term);
    if (!m->trie || !m->scores || !m->term || strmap_init(&m->vocab, n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    m->term[0] = -1;
    for (size_t i = 0; i < slots; i++)
        m->trie[i].key = PAIR_EMPTY;
    m->trie_mask = slots - 1;
    m->nscores = n;
    Bytes key = {0};
    for (size_t i = 0; i < n; i++) {
        Py_ssize_t len = key_bytes(PyList_GET_ITEM(pieces, i), 0, &key);
        double score = PyFloat_AsDouble(PyList_GET_ITEM(scores, i));
        if (len < 0 || (score == -1.0 && PyErr_Occurred())) {
            free(key.v);
            return -1;
        }
        m->scores[i] = score;
        if (strmap_put(&m->vocab, key.v, (size_t)len, (int32_t)i) < 0 ||
            trie_insert(m, key.v, (size_t)len, (int32_t)i) < 0) {
            free(key.v);
            PyErr_NoMemory();
            return -1;
        }
    }
    free(key.v);
    fallback_table(&m->vocab, m->fallback);
    return 0;
}

static int lookup(const char *name, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* The pre-tokenizer program native.py builds: a tuple of step tuples,
 *   ("split", scanner, behavior, invert)      ("byte_level", add_prefix_space, use_regex)
 *   ("bert",)   ("whitespace_split",)         ("metaspace", replacement, prepend_scheme, split) */
static int parse_steps(Encoder *self, PyObject *steps) {
    static const char *const scanners[] = {
        [SC_GPT2] = "gpt2", [SC_CL100K] = "cl100k", [SC_QWEN2] = "qwen2", [SC_O200K] = "o200k",
        [SC_DS_DIGITS] = "deepseek_digits", [SC_DS_CJK] = "deepseek_cjk", [SC_DS_MAIN] = "deepseek_main"};
    static const char *const behaviors[] = {[BH_ISOLATED] = "Isolated", [BH_REMOVED] = "Removed"};
    static const char *const schemes[] = {[PS_ALWAYS] = "always", [PS_FIRST] = "first", [PS_NEVER] = "never"};
    if (!PyTuple_Check(steps) || PyTuple_GET_SIZE(steps) > MAX_STEPS) {
        PyErr_SetString(PyExc_ValueError, "steps must be a tuple of at most 16 step tuples");
        return -1;
    }
    self->nsteps = (size_t)PyTuple_GET_SIZE(steps);
    for (size_t k = 0; k < self->nsteps; k++) {
        PyObject *t = PyTuple_GET_ITEM(steps, k);
        Step *st = &self->steps[k];
        const char *kind, *a, *b;
        PyObject *rep;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
            !(kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0)))) {
            PyErr_Format(PyExc_ValueError, "step %zu is not a (kind, ...) tuple", k);
            return -1;
        }
        if (strcmp(kind, "split") == 0) {
            st->kind = ST_SPLIT;
            if (!PyArg_ParseTuple(t, "sssp", &kind, &a, &b, &st->invert))
                return -1;
            st->scanner = lookup(a, scanners, sizeof scanners / sizeof *scanners);
            st->behavior = lookup(b, behaviors, sizeof behaviors / sizeof *behaviors);
            if (st->scanner < 0 || st->behavior < 0) {
                PyErr_Format(PyExc_ValueError, "no native split %s with behavior %s", a, b);
                return -1;
            }
        } else if (strcmp(kind, "byte_level") == 0) {
            st->kind = ST_BYTE_LEVEL;
            if (!PyArg_ParseTuple(t, "spp", &kind, &st->add_prefix_space, &st->use_regex))
                return -1;
        } else if (strcmp(kind, "bert") == 0) {
            st->kind = ST_BERT;
        } else if (strcmp(kind, "whitespace_split") == 0) {
            st->kind = ST_WHITESPACE_SPLIT;
        } else if (strcmp(kind, "metaspace") == 0) {
            st->kind = ST_METASPACE;
            if (!PyArg_ParseTuple(t, "sUsp", &kind, &rep, &b, &st->split))
                return -1;
            st->prepend = lookup(b, schemes, sizeof schemes / sizeof *schemes);
            if (PyUnicode_GET_LENGTH(rep) != 1 || st->prepend < 0) {
                PyErr_SetString(PyExc_ValueError, "metaspace needs one replacement character and a known scheme");
                return -1;
            }
            st->replacement = PyUnicode_READ_CHAR(rep, 0);
        } else {
            PyErr_Format(PyExc_ValueError, "unknown step %s", kind);
            return -1;
        }
    }
    return 0;
}

/* ---- the type --------------------------------------------------------------------------- */

static void Encoder_dealloc(Encoder *self) {
    bpe_free(&self->bpe);
    wordpiece_free(&self->wp);
    unigram_free(&self->ug);
    cache_free(&self->cache);
    added_trie_free(&self->raw);
    added_trie_free(&self->norm);
    Py_XDECREF(self->tables);
    if (self->ints) {
        for (size_t i = 0; i < self->nints; i++)
            Py_XDECREF(self->ints[i]);
        free(self->ints);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Encoder_init(Encoder *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "steps", "vocab", "merges", "scores", "byte_level", "ignore_merges",
                             "byte_fallback", "fuse_unk", "unk_id", "prefix", "max_chars", "unk_score", NULL};
    const char *model;
    PyObject *steps, *vocab, *merges = Py_None, *scores = Py_None, *prefix = NULL;
    int byte_level = 0, ignore_merges = 0, byte_fallback = 0, fuse_unk = 0, unk_id = -1;
    Py_ssize_t max_chars = 100;
    double unk_score = 0.0;
    if (self->ints) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|$OOppppiUnd", kwlist, &model, &steps, &vocab, &merges,
                                     &scores, &byte_level, &ignore_merges, &byte_fallback, &fuse_unk, &unk_id,
                                     &prefix, &max_chars, &unk_score))
        return -1;
    if (parse_steps(self, steps) < 0)
        return -1;
    int32_t max_id = unk_id;
    if (strcmp(model, "BPE") == 0) {
        self->model = MODEL_BPE;
        self->bpe.byte_level = byte_level;
        self->bpe.ignore_merges = ignore_merges;
        self->bpe.byte_fallback = byte_fallback;
        self->bpe.fuse_unk = fuse_unk;
        self->bpe.unk_id = unk_id;
        if (build_bpe(self, vocab, merges, &max_id) < 0)
            return -1;
    } else if (strcmp(model, "WordPiece") == 0) {
        self->model = MODEL_WORDPIECE;
        self->wp.unk_id = unk_id;
        self->wp.max_chars = (size_t)max_chars;
        if (unk_id < 0 || !prefix) {
            PyErr_SetString(PyExc_ValueError, "WordPiece needs unk_id and prefix");
            return -1;
        }
        if (build_wordpiece(self, vocab, prefix, &max_id) < 0)
            return -1;
    } else if (strcmp(model, "Unigram") == 0) {
        self->model = MODEL_UNIGRAM;
        self->ug.unk_id = unk_id;
        self->ug.unk_score = unk_score;
        self->ug.byte_fallback = byte_fallback;
        if (unk_id < 0) {
            PyErr_SetString(PyExc_ValueError, "Unigram needs unk_id");
            return -1;
        }
        if (build_unigram(self, vocab, scores) < 0)
            return -1;
        if ((size_t)max_id < self->ug.nscores)
            max_id = (int32_t)self->ug.nscores - 1;
    } else {
        PyErr_Format(PyExc_ValueError, "unknown model %s", model);
        return -1;
    }
    if (cache_init(&self->cache, CACHE_SLOTS, CACHE_ENTRIES) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    /* ints are made on first use (id_list) and only below a bound: a legal sparse id such as
     * 2^31 - 1 must not size the table, nor a large vocabulary cost its ints up front */
    self->nints = max_id < (int32_t)INTS_MAX ? (size_t)(max_id + 1) : INTS_MAX;
    self->ints = calloc(self->nints ? self->nints : 1, sizeof *self->ints);
    if (!self->ints) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Runs without the GIL: reads the str's code points, pre-tokenizes, runs the model. */
static int encode_segment(Encoder *self, int kind, const void *data, size_t n, int64_t offset, IdBuf *out) {
    Pieces p = {0};
    Scratch sc = {0};
    int err = -1;
    p.buf = malloc((n ? n : 1) * sizeof *p.buf);
    p.spans.v = malloc(sizeof *p.spans.v);
    if (!p.buf || !p.spans.v)
        goto done;
    for (size_t i = 0; i < n; i++)
        p.buf[i] = PyUnicode_READ(kind, data, i);
    p.len = n;
    p.spans.v[0] = (Span){0, n, offset};
    p.spans.n = p.spans.cap = 1;
    if (pretokenize(self->steps, self->nsteps, &p) < 0)
        goto done;
    if (self->model == MODEL_BPE && self->bpe.split_metaspace && split_before_metaspace(&p) < 0)
        goto done;
    for (size_t k = 0; k < p.spans.n; k++) {
        const uint32_t *s = p.buf + p.spans.v[k].start;
        size_t len = p.spans.v[k].end - p.spans.v[k].start;
        int r = self->model == MODEL_BPE         ? bpe_piece(&self->bpe, &self->cache, s, len, &sc, out)
                : self->model == MODEL_WORDPIECE ? wordpiece_piece(&self->wp, &self->cache, s, len, &sc, out)
                                                 : unigram_piece(&self->ug, &self->cache, s, len, &sc, out);
        if (r < 0)
            goto done;
    }
    err = 0;
done:
    free(p.buf);
    free(p.spans.v);
    free(p.tmp.v);
    free(sc.bytes);
    free(sc.work);
    return err;
}

/* The ids as a Python list; model ids come from the ints table, added token ids may lie beyond. */
static PyObject *id_list(Encoder *self, const IdBuf *ids) {
    PyObject *list = PyList_New((Py_ssize_t)ids->n);
    for (size_t i = 0; list && i < ids->n; i++) {
        size_t id = (size_t)ids->v[i];
        PyObject *o = id < self->nints ? self->ints[id] : NULL;
        if (o) {
            Py_INCREF(o);
        } else if (!(o = PyLong_FromSize_t(id))) {
            Py_CLEAR(list);
            break;
        } else if (id < self->nints) {
            self->ints[id] = Py_NewRef(o);
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, o);
    }
    return list;
}

static PyObject *Encoder_encode(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode(text: str, offset: int)");
        return NULL;
    }
    if (!self->ints) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is not initialised");
        return NULL;
    }
    PyObject *text = args[0];
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    IdBuf out = {0};
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = encode_segment(self, kind, data, n, offset, &out);
    Py_END_ALLOW_THREADS
    if (err) {
        free(out.v);
        return PyErr_NoMemory();
    }
    PyObject *list = id_list(self, &out);
    free(out.v);
    return list;
}

/* One matcher's tokens: a list of (content, id, ADDED_* flags), later entries winning. */
static int build_added(AddedTrie *t, PyObject *tokens) {
    static const char *shape = "added tokens must be a list of (content, id, flags)";
    if (!PyList_Check(tokens)) {
        PyErr_SetString(PyExc_TypeError, shape);
        return -1;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tokens); i++) {
        PyObject *item = PyList_GET_ITEM(tokens, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, shape);
            return -1;
        }
        total += (size_t)PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(item, 0));
    }
    added_trie_free(t);
    if (added_trie_init(t, total) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tokens); i++) {
        PyObject *item = PyList_GET_ITEM(tokens, i), *content = PyTuple_GET_ITEM(item, 0);
        int32_t id;
        long strip = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        if ((strip == -1 && PyErr_Occurred()) || read_id(PyTuple_GET_ITEM(item, 1), &id) < 0)
            return -1;
        Py_ssize_t n = PyUnicode_GET_LENGTH(content);
        if (!n)
            continue;
        uint32_t *cps = PyUnicode_AsUCS4Copy(content);
        if (!cps)
            return -1;
        int err = added_trie_insert(t, cps, (size_t)n, id, (int)strip);
        PyMem_Free(cps);
        if (err < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static PyObject *Encoder_set_added(Encoder *self, PyObject *args) {
    PyObject *raw, *norm;
    if (!PyArg_ParseTuple(args, "OO:set_added", &raw, &norm) || build_added(&self->raw, raw) < 0 ||
        build_added(&self->norm, norm) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Encode text[start, stop) of one segment between raw added tokens: normalize it, cut out the
 * normalized added tokens, encode the rest. Offsets are those of AddedVocabulary.split. */
static int encode_between(Encoder *self, PyObject *text, size_t start, size_t stop, PyObject *normalizer,
                          AddedCuts *cuts, IdBuf *out) {
    PyObject *piece = PyUnicode_Substring(text, (Py_ssize_t)start, (Py_ssize_t)stop);
    if (!piece)
        return -1;
    if (normalizer != Py_None) {
        Py_SETREF(piece, PyObject_CallOneArg(normalizer, piece));
        if (!piece)
            return -1;
        if (!PyUnicode_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "the normalizer returned a non-str");
            Py_DECREF(piece);
            return -1;
        }
    }
    int kind = PyUnicode_KIND(piece);
    const char *data = PyUnicode_DATA(piece);
    size_t n = (size_t)PyUnicode_GET_LENGTH(piece);
    uint32_t *cps = NULL;
    int err = 0;
    /* without normalized added tokens the whole piece is one segment */
    AddedCut whole = {0, n, -1};
    const AddedCut *v = &whole;
    size_t count = n ? 1 : 0;
    if (self->norm.ntokens && n) {
        cps = PyUnicode_AsUCS4Copy(piece);
        if (!cps || added_split(&self->norm, cps, n, cuts) < 0)
            err = cps ? -1 : -2;
        v = cuts->v;
        count = err ? 0 : cuts->n;
    }
    for (size_t k = 0; !err && k < count; k++) {
        AddedCut c = v[k];
        if (c.id >= 0) {
            err = ids_push(out, c.id);
            continue;
        }
        Py_BEGIN_ALLOW_THREADS
        err = encode_segment(self, kind, data + c.start * (size_t)kind, c.stop - c.start,
                             (int64_t)(start + c.start), out);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(cps);
    Py_DECREF(piece);
    if (err == -1)
        PyErr_NoMemory();
    return err ? -1 : 0;
}

static PyObject *Encoder_encode_text(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_text(text: str, normalizer: callable | None)");
        return NULL;
    }
    if (!self->ints) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is not initialised");
        return NULL;
    }
    PyObject *text = args[0], *normalizer = args[1];
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    AddedCuts cuts = {0}, sub = {0};
    IdBuf out = {0};
    int err = 0;
    uint32_t *cps = n ? PyUnicode_AsUCS4Copy(text) : NULL;
    if (n && !cps)
        return NULL;
    if (n && added_split(&self->raw, cps, n, &cuts) < 0) {
        PyErr_NoMemory();
        err = -1;
    }
    for (size_t k = 0; !err && k < cuts.n; k++) {
        AddedCut c = cuts.v[k];
        if (c.id >= 0) {
            if (ids_push(&out, c.id) < 0) {
                PyErr_NoMemory();
                err = -1;
            }
        } else {
            err = encode_between(self, text, c.start, c.stop, normalizer, &sub, &out);
        }
    }
    PyMem_Free(cps);
    free(cuts.v);
    free(sub.v);
    PyObject *list = err ? NULL : id_list(self, &out);
    free(out.v);
    return list;
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))Encoder_encode, METH_FASTCALL,
     "encode(normalized_segment, offset) -> list[int]: the ids of one segment."},
    {"set_added", (PyCFunction)Encoder_set_added, METH_VARARGS,
     "set_added(raw, normalized): the added tokens encode_text matches, as (content, id, flags) lists."},
    {"encode_text", (PyCFunction)(void (*)(void))Encoder_encode_text, METH_FASTCALL,
     "encode_text(text, normalizer) -> list[int]: added tokens, normalization and segments in one call."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
    .tp_doc = "A tokenizer model plus pre-tokenizer, encoding normalized segments to ids.",
};

/* ---- Normalizer ------------------------------------------------------------------------- */

enum { NORM_BERT, NORM_NFC, NORM_PRECOMPILED };

typedef struct {
    PyObject_HEAD
    int kind;
    int flags;        /* BERT_* */
    Charsmap map;     /* points into units and repl, owned here */
    uint32_t *units;
    uint8_t *repl;
    PyObject *pure;   /* the pure-Python normalizer, which raises the errors of its input */
} Normalizer;

static void Normalizer_dealloc(Normalizer *self) {
    free(self->units);
    free(self->repl);
    Py_XDECREF(self->pure);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Normalizer(pure, "bert", flags=BERT_* bits), Normalizer(pure, "nfc") or
 * Normalizer(pure, "precompiled", units=<little-endian u32 bytes>, replacements=<bytes>) */
static int Normalizer_init(Normalizer *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"pure", "kind", "flags", "units", "replacements", NULL};
    PyObject *pure;
    const char *kind;
    int flags = 0;
    Py_buffer units = {0}, repl = {0};
    if (self->pure) {
        PyErr_SetString(PyExc_RuntimeError, "Normalizer is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|$iy*y*", kwlist, &pure, &kind, &flags, &units, &repl))
        return -1;
    int err = 0;
    if (strcmp(kind, "bert") == 0) {
        self->kind = NORM_BERT;
        self->flags = flags & (BERT_CLEAN | BERT_CHINESE | BERT_STRIP | BERT_LOWER);
    } else if (strcmp(kind, "nfc") == 0) {
        self->kind = NORM_NFC;
    } else if (strcmp(kind, "precompiled") == 0) {
        self->kind = NORM_PRECOMPILED;
        size_t nunits = (size_t)units.len / 4;
        if (nunits == 0) {
            PyErr_SetString(PyExc_ValueError, "precompiled needs at least one trie unit");
            err = -1;
        } else if (!(self->units = malloc(nunits * 4)) || !(self->repl = malloc((size_t)repl.len + 1))) {
            PyErr_NoMemory();
            err = -1;
        } else {
            const uint8_t *u = units.buf;
            for (size_t i = 0; i < nunits; i++)
                self->units[i] = (uint32_t)u[4 * i] | (uint32_t)u[4 * i + 1] << 8 |
                                 (uint32_t)u[4 * i + 2] << 16 | (uint32_t)u[4 * i + 3] << 24;
            memcpy(self->repl, repl.buf, (size_t)repl.len);
            self->map = (Charsmap){self->units, nunits, self->repl, (size_t)repl.len, {0}};
            charsmap_init(&self->map);
        }
    } else {
        PyErr_Format(PyExc_ValueError, "unknown normalizer %s", kind);
        err = -1;
    }
    if (units.obj)
        PyBuffer_Release(&units);
    if (repl.obj)
        PyBuffer_Release(&repl);
    if (err)
        return -1;
    Py_INCREF(pure);
    self->pure = pure;
    return 0;
}

static PyObject *Normalizer_call(Normalizer *self, PyObject *args, PyObject *kw) {
    PyObject *text;
    if ((kw && PyDict_GET_SIZE(kw)) || PyTuple_GET_SIZE(args) != 1 ||
        !PyUnicode_Check(text = PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "normalizer(text: str) -> str");
        return NULL;
    }
    if (!self->pure) {
        PyErr_SetString(PyExc_RuntimeError, "Normalizer is not initialised");
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    uint32_t *in = malloc((n ? n : 1) * sizeof *in);
    CpBuf tmp = {0}, out = {0};
    int err = 0;
    if (!in)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++)
        in[i] = PyUnicode_READ(kind, data, i);
    if (self->kind == NORM_BERT)
        err = bert_normalize(self->flags, in, n, &tmp, &out);
    else if (self->kind == NORM_NFC)
        err = nfc_normalize(in, n, &tmp, &out);
    else
        err = precompiled_normalize(&self->map, in, n, &out);
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (err == -2)
        result = PyObject_CallOneArg(self->pure, text);
    else if (err < 0)
        result = PyErr_NoMemory();
    else if (out.n == n && (n == 0 || memcmp(out.v, in, n * sizeof *in) == 0))
        result = Py_NewRef(text);
    else
        result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out.v ? out.v : in, (Py_ssize_t)out.n);
    free(in);
    free(tmp.v);
    free(out.v);
    return result;
}

static PyMemberDef Normalizer_members[] = {
    {"pure", T_OBJECT_EX, offsetof(Normalizer, pure), READONLY, "the pure-Python normalizer this one reproduces"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NormalizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.Normalizer",
    .tp_basicsize = sizeof(Normalizer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Normalizer_init,
    .tp_dealloc = (destructor)Normalizer_dealloc,
    .tp_call = (ternaryfunc)Normalizer_call,
    .tp_members = Normalizer_members,
    .tp_doc = "A BertNormalizer, NFC or Precompiled normalizer: normalizer(text) -> str.",
};

/* grapheme_ends(text) -> list[int]: where each extended grapheme cluster ends, for the tests
 * that hold the native segmentation against the `regex` module's \X. */
static PyObject *grapheme_ends(PyObject *module, PyObject *text) {
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "grapheme_ends(text: str)");
        return NULL;
    }
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    uint32_t *s = malloc((n ? n : 1) * sizeof *s);
    PyObject *list = s ? PyList_New(0) : PyErr_NoMemory();
    for (size_t i = 0; list && i < n; i++)
        s[i] = PyUnicode_READ_CHAR(text, (Py_ssize_t)i);
    for (size_t i = 0; list && i < n;) {
        i = grapheme_end(s, n, i);
        PyObject *end = PyLong_FromSize_t(i);
        if (!end || PyList_Append(list, end) < 0)
            Py_CLEAR(list);
        Py_XDECREF(end);
    }
    free(s);
    return list;
}

static PyMethodDef module_methods[] = {
    {"grapheme_ends", grapheme_ends, METH_O, "grapheme_ends(text) -> list[int]: the end of each grapheme cluster."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pymtok._native",
    .m_doc = "pymtok's native encoding core.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    init_gpt2_map();
    if (PyType_Ready(&EncoderType) < 0 || PyType_Ready(&NormalizerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddObjectRef(m, "Normalizer", (PyObject *)&NormalizerType) < 0 || mtok_tables_register(m) < 0 ||
        PyModule_AddIntConstant(m, "BERT_CLEAN", BERT_CLEAN) < 0 ||
        PyModule_AddIntConstant(m, "BERT_CHINESE", BERT_CHINESE) < 0 ||
        PyModule_AddIntConstant(m, "BERT_STRIP", BERT_STRIP) < 0 ||
        PyModule_AddIntConstant(m, "BERT_LOWER", BERT_LOWER) < 0 ||
        PyModule_AddIntConstant(m, "ADDED_LSTRIP", ADDED_LSTRIP) < 0 ||
        PyModule_AddIntConstant(m, "ADDED_RSTRIP", ADDED_RSTRIP) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
