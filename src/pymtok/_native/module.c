/* pymtok._native: the Python face of the native core.
 *
 * Two types, built once per tokenizer (pymtok/native.py decides when the native path is exact
 * and builds them):
 *  - Encoder, from the model's tables and a description of the pre-tokenizer:
 *    Encoder.encode(normalized_segment, offset) returns the ids of one segment, and
 *    Encoder.encode_text(text, normalizer) those of a whole text, added tokens (set_added)
 *    matched and each segment between them normalized, in one call;
 *  - Normalizer, a BertNormalizer, NFC or Precompiled: calling it normalizes a str.
 * The work runs with the GIL released (for texts of GIL_FREE_CHARS or more) so that threads
 * encode in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <pythread.h>
#include <structmember.h>

#include "mtok_tables.h"

enum { MODEL_BPE, MODEL_WORDPIECE, MODEL_UNIGRAM };
#define MAX_STEPS 16
#define CACHE_SLOTS (1u << 18)
/* the piece cache's memory: some 200,000 English pieces or 60,000 long CJK ones before it is
 * emptied and refilled with the text at hand */
#define CACHE_BYTES ((size_t)8 << 20)
#define INTS_MAX (1u << 20)
/* encode_offsets' shared tuples: those of spans starting before SPAN_STARTS and narrower than
 * SPAN_WIDTHS characters, at most 256K tuples (some 16 MB) per Encoder, made as spans occur. A
 * span's own tuple counts towards the cyclic collector's next collection, which walks every list
 * the caller keeps: code's runs of spaces (tokens of 16 to 63 characters) were enough to set
 * one off in a round of 150 calls of 2 KB. */
#define SPAN_STARTS 4096u
#define SPAN_WIDTHS 64u
#define SPAN_AHEAD 24u
#define BATCH_CHUNK_CHARS (1u << 13)
/* A call lets the GIL go for a text of at least this many characters: for a shorter one,
 * letting it go and taking it back is a sizeable part of the call ("Hello": a fifth), and
 * other threads would gain too short a time to use it. */
#define GIL_FREE_CHARS 512u

static inline PyThreadState *gil_release(size_t chars) { return chars >= GIL_FREE_CHARS ? PyEval_SaveThread() : NULL; }

static inline void gil_take(PyThreadState *released) {
    if (released)
        PyEval_RestoreThread(released);
}

/* A vocabulary's ints: the Python int of each id below n, made on first use, so that a list of
 * ids holds pointers to them rather than an int object of its own per id. Only ids below a
 * bound have one: a legal sparse id such as 2^31 - 1 must not size the table. */
typedef struct {
    PyObject **v;
    size_t n;
} Ints;

static int ints_init(Ints *t, size_t ids) {
    t->n = ids < INTS_MAX ? ids : INTS_MAX;
    t->v = pages_alloc(t->n * sizeof *t->v);
    return t->v ? 0 : -1;
}

static void ints_free(Ints *t) {
    for (size_t i = 0; t->v && i < t->n; i++)
        Py_XDECREF(t->v[i]);
    pages_free(t->v, t->n * sizeof *t->v);
    t->v = NULL;
    t->n = 0;
}

typedef struct {
    PyObject_HEAD
    int model;
    BPE bpe;
    WordPiece wp;
    Unigram ug;
    Step steps[MAX_STEPS];
    size_t nsteps;
    int ascii_scanner;   /* the steps' ascii_scanner, for a model that takes its pieces; else -1 */
    int64_t ascii_prefix; /* and the character it prepends to each piece, or -1 */
    Cache cache;
    Ints ints;
    AddedTrie raw, norm; /* added tokens matched before / after normalization (set_added) */
    /* per trie: the pairs of characters side by side in a token, (CUT_RSTRIP | c) for the last
     * character c of an rstrip token and (CUT_WORD_FIRST | c) for the first of a single_word one,
     * sorted: what a cut between two characters must not be (added_cut_ok) */
    uint64_t *inside[2];
    size_t ninside[2];
    IdBuf prefix, suffix; /* the post-processor's ids around a text's (set_post) */
    PyObject *tables;    /* a .mtok's MtokTables the model reads in place, kept alive here */
    OffsetLengths offl;  /* encode_offsets' token lengths (set_offsets); first is NULL until then */
    PyObject **spans;    /* encode_offsets' shared (start, end) tuples (span_slot); NULL until then */
    /* normalizers.normalize_first for the normalizer encode_text is given, when Metaspace's
     * "first" needs the first segment's alignment (set_first); NULL otherwise */
    PyObject *first;
} Encoder;

/* ---- reading Python tables -------------------------------------------------------------- */

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
            int b = gpt2_byte(c);
            if (b < 0)
                return -1;
            out->v[w++] = (uint8_t)b;
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

/* BPE.serial: models made in this process, counted */
static atomic_uint_fast64_t bpe_serials;

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
    if (m->byte_level ? bpe_byte_joins_init(m, 0) < 0 : bpe_chars_init(m) < 0)
        goto nomem;
    /* Whether no token has U+2581 right after another character: then no merge can join
     * across such a point and pieces may be cut there (see bpe_spans). */
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
            bpe_byte_joins_add(m->byte_joins->bits, key.v, (size_t)len);
            continue;
        }
        metaspace_inside |= bpe_chars_add(m, key.v, (size_t)len, id);
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

/* end_of_word_suffix for a built BPE: its UTF-8, and for byte-level vocabularies the token of each
 * byte + the suffix. */
static int bpe_set_suffix(BPE *m, PyObject *suffix) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(suffix, &len);
    if (!s)
        return -1;
    if (!len)
        return 0;
    if ((size_t)len > BPE_SUFFIX_MAX || m->byte_fallback) {
        PyErr_SetString(PyExc_ValueError, "no native BPE for this end_of_word_suffix (too long, or with byte_fallback)");
        return -1;
    }
    memcpy(m->suffix, s, (size_t)len);
    m->suffix_len = (size_t)len;
    /* a suffix changes which token a piece's last character starts as: no cut inside a piece
     * keeps its ids */
    free(m->joins);
    m->joins = NULL;
    bpe_byte_joins_free(m);
    m->split_metaspace = 0;
    if (!m->byte_level)
        return 0;
    Bytes key = {0};
    Py_ssize_t n = key_bytes(suffix, 1, &key);
    if (n == -1)
        PyErr_SetString(PyExc_ValueError, "a byte-level end_of_word_suffix must be of byte-level characters");
    if (n < 0) {
        free(key.v);
        return -1;
    }
    memmove(key.v + 1, key.v, (size_t)n);
    for (int b = 0; b < 256; b++) {
        key.v[0] = (uint8_t)b;
        m->end_unit[b] = m->mtok ? mtok_byte_level_id(m->mtok, key.v, (size_t)n + 1) : strmap_get(&m->vocab, key.v, (size_t)n + 1);
    }
    free(key.v);
    return 0;
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
        if (wordpiece_put(m, key.v, (size_t)len, id, pre.v, (size_t)plen) < 0)
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
    size_t n = (size_t)PyList_GET_SIZE(pieces);
    for (size_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(PyList_GET_ITEM(pieces, i))) {
            PyErr_SetString(PyExc_TypeError, "Unigram pieces must be str");
            return -1;
        }
    }
    /* room for about three edges a piece (T5 and ALBERT have 2.3-2.6); trie_insert grows it */
    size_t slots = 16;
    while (slots < 4 * n)
        slots *= 2;
    m->trie = malloc(slots * sizeof *m->trie);
    m->scores = malloc((n ? n : 1) * sizeof *m->scores);
    m->nnodes = 0; /* node 0 is the root; 0 as a child means none */
    m->nedges = 0;
    if (!m->trie || !m->scores || strmap_init(&m->vocab, n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < 256; i++)
        m->root_id[i] = -1;
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

/* The regex engine's program for a Split pattern, NULL with ValueError saying why it refuses it. */
static Regex *compile_pattern(PyObject *pattern) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(pattern);
    uint32_t *cps = PyUnicode_AsUCS4Copy(pattern);
    if (!cps)
        return NULL;
    const char *why = NULL;
    Regex *re = regex_compile(cps, (size_t)n, &why);
    PyMem_Free(cps);
    if (!re)
        PyErr_Format(PyExc_ValueError, "the regex engine refuses %R: %s", pattern, why);
    return re;
}

static void steps_free(Step *steps, size_t n) {
    for (size_t k = 0; k < n; k++) {
        regex_free(steps[k].regex);
        steps[k].regex = NULL;
    }
}

/* The pre-tokenizer program native.py builds: a tuple of step tuples,
 *   ("split", scanner, behavior, invert)      ("byte_level", add_prefix_space, use_regex, to_chars)
 *   ("delimiter", character)                  ("metaspace", replacement, prepend_scheme, split)
 *   ("bert",)   ("whitespace_split",)   ("scripts",)
 *   ("split", "regex", behavior, invert, pattern): the regex engine's program for the pattern.
 * The programs are the Steps', freed by steps_free (also when this fails). */
static int parse_steps(Step *out, size_t *nsteps, PyObject *steps) {
    static const char *const scanners[] = {
        [SC_GPT2] = "gpt2", [SC_CL100K] = "cl100k", [SC_QWEN2] = "qwen2", [SC_O200K] = "o200k",
        [SC_DS_DIGITS] = "deepseek_digits", [SC_DS_CJK] = "deepseek_cjk", [SC_DS_MAIN] = "deepseek_main",
        [SC_CLIP] = "clip", [SC_PUNCTUATION] = "punctuation", [SC_NUMERIC] = "numeric", [SC_WORDS] = "words",
        [SC_REGEX] = "regex"};
    static const char *const behaviors[] = {
        [BH_ISOLATED] = "Isolated", [BH_REMOVED] = "Removed", [BH_MERGED_WITH_PREVIOUS] = "MergedWithPrevious",
        [BH_MERGED_WITH_NEXT] = "MergedWithNext", [BH_CONTIGUOUS] = "Contiguous"};
    static const char *const schemes[] = {[PS_ALWAYS] = "always", [PS_FIRST] = "first", [PS_NEVER] = "never"};
    if (!PyTuple_Check(steps) || PyTuple_GET_SIZE(steps) > MAX_STEPS) {
        PyErr_SetString(PyExc_ValueError, "steps must be a tuple of at most 16 step tuples");
        return -1;
    }
    steps_free(out, *nsteps);
    *nsteps = (size_t)PyTuple_GET_SIZE(steps);
    memset(out, 0, *nsteps * sizeof *out);
    for (size_t k = 0; k < *nsteps; k++) {
        PyObject *t = PyTuple_GET_ITEM(steps, k);
        Step *st = &out[k];
        const char *kind, *a, *b;
        PyObject *rep;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
            !(kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0)))) {
            PyErr_Format(PyExc_ValueError, "step %zu is not a (kind, ...) tuple", k);
            return -1;
        }
        if (strcmp(kind, "split") == 0) {
            st->kind = ST_SPLIT;
            PyObject *pattern = NULL;
            if (!PyArg_ParseTuple(t, "sssp|U", &kind, &a, &b, &st->invert, &pattern))
                return -1;
            st->scanner = lookup(a, scanners, sizeof scanners / sizeof *scanners);
            st->behavior = lookup(b, behaviors, sizeof behaviors / sizeof *behaviors);
            if (st->scanner < 0 || st->behavior < 0 || (st->scanner == SC_REGEX) != (pattern != NULL)) {
                PyErr_Format(PyExc_ValueError, "no native split %s with behavior %s", a, b);
                return -1;
            }
            if (pattern && !(st->regex = compile_pattern(pattern)))
                return -1;
        } else if (strcmp(kind, "delimiter") == 0) {
            *st = (Step){.kind = ST_SPLIT, .scanner = SC_DELIMITER, .behavior = BH_REMOVED};
            if (!PyArg_ParseTuple(t, "sU", &kind, &rep))
                return -1;
            if (PyUnicode_GET_LENGTH(rep) != 1) {
                PyErr_SetString(PyExc_ValueError, "delimiter needs one character");
                return -1;
            }
            st->delimiter = PyUnicode_READ_CHAR(rep, 0);
        } else if (strcmp(kind, "byte_level") == 0) {
            st->kind = ST_BYTE_LEVEL;
            if (!PyArg_ParseTuple(t, "sppp", &kind, &st->add_prefix_space, &st->use_regex, &st->to_chars))
                return -1;
        } else if (strcmp(kind, "bert") == 0) {
            st->kind = ST_BERT;
        } else if (strcmp(kind, "whitespace_split") == 0) {
            st->kind = ST_WHITESPACE_SPLIT;
        } else if (strcmp(kind, "scripts") == 0) {
            st->kind = ST_SCRIPTS;
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
    steps_free(self->steps, self->nsteps);
    bpe_free(&self->bpe);
    wordpiece_free(&self->wp);
    unigram_free(&self->ug);
    cache_free(&self->cache);
    added_trie_free(&self->raw);
    added_trie_free(&self->norm);
    free(self->inside[0]);
    free(self->inside[1]);
    free(self->prefix.v);
    free(self->suffix.v);
    offsets_lengths_free(&self->offl);
    if (self->spans) {
        for (size_t i = 0; i < SPAN_STARTS * SPAN_WIDTHS; i++)
            Py_XDECREF(self->spans[i]);
        free(self->spans);
    }
    Py_XDECREF(self->tables);
    Py_XDECREF(self->first);
    ints_free(&self->ints);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Encoder_init(Encoder *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "steps", "vocab", "merges", "scores", "byte_level", "ignore_merges",
                             "byte_fallback", "fuse_unk", "unk_id", "prefix", "max_chars", "unk_score", "suffix",
                             NULL};
    const char *model;
    PyObject *steps, *vocab, *merges = Py_None, *scores = Py_None, *prefix = NULL, *suffix = NULL;
    int byte_level = 0, ignore_merges = 0, byte_fallback = 0, fuse_unk = 0, unk_id = -1;
    Py_ssize_t max_chars = 100;
    double unk_score = 0.0;
    if (self->ints.v) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|$OOppppiUndU", kwlist, &model, &steps, &vocab, &merges,
                                     &scores, &byte_level, &ignore_merges, &byte_fallback, &fuse_unk, &unk_id,
                                     &prefix, &max_chars, &unk_score, &suffix))
        return -1;
    if (parse_steps(self->steps, &self->nsteps, steps) < 0)
        return -1;
    self->ascii_scanner = ascii_scanner(self->steps, self->nsteps, &self->ascii_prefix);
    /* BPE and WordPiece take the pieces where they lie in the text: a prefix is Unigram's alone
     * (any other model is refused below) */
    if (self->ascii_prefix >= 0 && strcmp(model, "Unigram") != 0)
        self->ascii_scanner = -1;
    int32_t max_id = unk_id;
    if (strcmp(model, "BPE") == 0) {
        self->model = MODEL_BPE;
        self->bpe.byte_level = byte_level;
        self->bpe.ignore_merges = ignore_merges;
        self->bpe.byte_fallback = byte_fallback;
        self->bpe.fuse_unk = fuse_unk;
        self->bpe.unk_id = unk_id;
        self->bpe.serial = atomic_fetch_add(&bpe_serials, 1) + 1;
        if (build_bpe(self, vocab, merges, &max_id) < 0 || (suffix && bpe_set_suffix(&self->bpe, suffix) < 0))
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
    if (cache_init(&self->cache, CACHE_SLOTS, CACHE_BYTES) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (ints_init(&self->ints, max_id < 0 ? 0 : (size_t)max_id + 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Buffers of one encode call, reused across its segments and texts: a document cut by many
 * added tokens (Gemma's newline tokens) would otherwise pay several mallocs per segment. */
typedef struct {
    uint32_t *text;   /* the code points of the text being encoded */
    size_t text_cap;
    uint32_t *buf;    /* a segment's code points, which the pre-tokenizer may rebuild */
    size_t buf_cap;
    uint32_t *spare;  /* Pieces' spare buffer */
    size_t spare_cap;
    Spans spans, tmp;
    IdBuf out;        /* encode_text's and encode_offsets' ids, kept for the next call */
    IdBuf offs;       /* encode_offsets' spans */
    Scratch sc;
    CpBuf norm[3];    /* normalize_ops */
    CpBuf align[2];   /* encode_offsets: a normalizer's alignment */
    IdBuf rel;        /* encode_offsets: a WordPiece or Unigram segment's spans of its characters */
    IdBuf pieces;     /* ascii_split's pieces */
    AddedCuts cuts, sub;
} Work;

static void work_free(Work *w) {
    free(w->text);
    free(w->buf);
    free(w->spare);
    free(w->out.v);
    free(w->offs.v);
    free(w->spans.v);
    free(w->tmp.v);
    free(w->sc.bytes);
    free(w->sc.work);
    free(w->sc.words);
    free(w->sc.pairs);
    for (int i = 0; i < 3; i++)
        free(w->norm[i].v);
    for (int i = 0; i < 2; i++)
        free(w->align[i].v);
    free(w->rel.v);
    free(w->pieces.v);
    free(w->cuts.v);
    free(w->sub.v);
}

/* Each thread keeps one Work between calls, so that a call on a short text allocates nothing
 * but its ids; a Work grown past WORK_KEEP bytes by a long text is given back instead. A call
 * made while the thread's Work is in use (a Python normalizer encoding with another tokenizer
 * in the middle of a text) takes a Work of its own. */
#define WORK_KEEP ((size_t)1 << 20)

typedef struct {
    Work w;
    int busy;
} ThreadWork;

static pthread_key_t work_key;
static int work_key_ok;
/* The thread's ThreadWork, which the key holds too so that it is freed when the thread ends:
 * read here without pthread_getspecific's call on every encode. */
static __thread ThreadWork *work_here;

/* Run by the ending thread itself: an encode from a later key destructor of that thread then
 * takes a new ThreadWork, which the key frees in its next round. */
static void thread_work_free(void *p) {
    work_here = NULL;
    work_free(&((ThreadWork *)p)->w);
    free(p);
}

static size_t work_bytes(const Work *w) {
    size_t n = (w->text_cap + w->buf_cap + w->spare_cap) * sizeof(uint32_t) + (w->spans.cap + w->tmp.cap) * sizeof(Span) +
               (w->out.cap + w->offs.cap + w->rel.cap + w->pieces.cap) * sizeof(int32_t) +
               (w->sc.pairs ? sizeof(PairMemo) << PAIR_MEMO_BITS : 0) + w->sc.bytes_cap + w->sc.work_cap + w->sc.words_cap * sizeof(Word) +
               (w->cuts.cap + w->sub.cap) * sizeof(AddedCut);
    for (int i = 0; i < 3; i++)
        n += w->norm[i].cap * sizeof(uint32_t);
    for (int i = 0; i < 2; i++)
        n += w->align[i].cap * sizeof(uint32_t);
    return n;
}

/* The thread's Work, or *own emptied when it is in use or cannot be had. */
static Work *work_take(Work *own) {
    ThreadWork *t = work_here;
    if (!t && work_key_ok && (t = calloc(1, sizeof *t))) {
        if (pthread_setspecific(work_key, t) != 0) {
            free(t);
            t = NULL;
        }
        work_here = t;
    }
    if (t && !t->busy) {
        t->busy = 1;
        return &t->w;
    }
    memset(own, 0, sizeof *own);
    return own;
}

/* The largest Work a call has given back, in bytes (work_peak()): what tests bound. */
static size_t work_peak_bytes;

static void work_give(Work *w, Work *own) {
    size_t used = work_bytes(w), peak = __atomic_load_n(&work_peak_bytes, __ATOMIC_RELAXED);
    while (used > peak && !__atomic_compare_exchange_n(&work_peak_bytes, &peak, used, 1, __ATOMIC_RELAXED,
                                                       __ATOMIC_RELAXED))
        ;
    if (w == own) {
        work_free(own);
        return;
    }
    if (used > WORK_KEEP) {
        work_free(w);
        memset(w, 0, sizeof *w);
    }
    ((ThreadWork *)((char *)w - offsetof(ThreadWork, w)))->busy = 0;
}

/* The str's code points [from, from + n) into w->text; fails on out of memory. */
static int read_text_at(Work *w, int kind, const void *data, size_t from, size_t n) {
    if (cps_room(&w->text, &w->text_cap, n) < 0)
        return -1;
    if (kind == PyUnicode_4BYTE_KIND) {
        memcpy(w->text, (const uint32_t *)data + from, n * sizeof *w->text);
    } else if (kind == PyUnicode_1BYTE_KIND) {
        const uint8_t *d = (const uint8_t *)data + from;
        for (size_t i = 0; i < n; i++)
            w->text[i] = d[i];
    } else {
        const uint16_t *d = (const uint16_t *)data + from;
        for (size_t i = 0; i < n; i++)
            w->text[i] = d[i];
    }
    return 0;
}

static int read_text(Work *w, int kind, const void *data, size_t n) { return read_text_at(w, kind, data, 0, n); }

/* The str's code points [from, from + n): its own where it holds them as such (a 4-byte str,
 * which the caller's reference keeps unchanged with or without the GIL), else read_text_at's;
 * NULL on out of memory. */
static const uint32_t *text_cps(Work *w, int kind, const void *data, size_t from, size_t n) {
    if (kind == PyUnicode_4BYTE_KIND)
        return (const uint32_t *)data + from;
    return read_text_at(w, kind, data, from, n) < 0 ? NULL : w->text;
}

/* The code points of UTF-8 s[0, nb) into w->text, *n of them: 0, -1 on out of memory, or 1 when
 * s is not UTF-8 (Python's strict decoding), *bad the first byte of the sequence at fault. */
static int read_utf8(Work *w, const uint8_t *s, size_t nb, size_t *n, size_t *bad) {
    if (cps_room(&w->text, &w->text_cap, nb) < 0)
        return -1;
    size_t k = 0;
    for (size_t i = 0, sub; i < nb; k++) {
        if (s[i] < 0x80) {
            w->text[k] = s[i++];
            continue;
        }
        size_t len = utf8_sequence(s + i, nb - i, &sub);
        if (!len) {
            *bad = i;
            return 1;
        }
        i += utf8_get(s + i, len, &w->text[k]);
    }
    *n = k;
    return 0;
}

/* The pieces' buffers, grown by a pre-tokenizer, kept for the next segment and call. A rebuilding
 * step (ByteLevel's prefix space, Metaspace) swaps the text's buffer with the spare one: each
 * room is the one Pieces records with its buffer, never inferred from the pointers. */
static void work_keep(Work *w, const Pieces *p) {
    w->buf = p->buf;
    w->buf_cap = p->cap;
    w->spare = p->spare;
    w->spare_cap = p->spare_cap;
    w->spans = p->spans;
    w->tmp = p->tmp;
}

/* Whether the pre-tokenizer's cut may fall before s[c] of s[0..n): a space with an ASCII letter
 * or digit on either side (windowed) */
static inline int ascii_cut_ok(const uint32_t *s, size_t n, size_t c) {
    return c > 0 && c + 1 < n && s[c] == ' ' && is_ascii_alnum(s[c - 1]) && is_ascii_alnum(s[c + 1]);
}

/* The first cut ascii_cut_ok allows from s[c] on, else n */
static inline size_t next_cut(const uint32_t *s, size_t n, size_t c) {
    while (c < n && !ascii_cut_ok(s, n, c))
        c++;
    return c;
}

/* The least stretch of text window_ids takes apart, ASCII or not: each costs a call of either way */
#define ASCII_STRETCH 256

/* The model on the ASCII text that starts s[0..n), where the pre-tokenizer has an ascii_scanner:
 * the text is cut as its bytes, which are the pieces' UTF-8 too, so the cut reads a quarter of
 * the memory and the pieces go to the model as they are cut (without their spans, a copy of the
 * text and the model's own pass to UTF-8). All of s when it is ASCII; with `whole` unset, else
 * its ASCII characters up to the last cut windowed() allows before the first other one, when
 * those are ASCII_STRETCH or more. *done: the characters encoded (0 when not taken), their words
 * left in w->sc as bpe_spans and wordpiece_spans leave them (spans_out: WordPiece's and
 * Unigram's, as wordpiece_spans' and unigram_ascii's); *ascii: how many characters start s that
 * are ASCII. -1 out of memory. */
static int ascii_ids(Encoder *self, Cache *cache, const uint32_t *s, size_t n, Work *w, IdBuf *out, IdBuf *spans_out,
                     int whole, size_t *done, size_t *ascii) {
    *done = *ascii = 0;
    if (self->ascii_scanner < 0 || n > INT32_MAX)
        return 0;
    ptrdiff_t q = ascii_bytes(&w->sc, s, n);
    if (q < 0)
        return -1;
    size_t c = *ascii = (size_t)q;
    if (c < n) {
        if (whole)
            return 0;
        while (c > 0 && !ascii_cut_ok(s, n, c))
            c--;
        if (c < ASCII_STRETCH)
            return 0;
    }
    if (ascii_split(self->ascii_scanner, w->sc.bytes, c, &w->pieces) < 0)
        return -1;
    size_t npieces = w->pieces.n / 2;
    int err = self->model == MODEL_BPE ? bpe_ascii(&self->bpe, cache, s, w->pieces.v, npieces, &w->sc, out)
              : self->model == MODEL_WORDPIECE
                  ? wordpiece_ascii(&self->wp, cache, w->pieces.v, npieces, &w->sc, out, spans_out)
                  : unigram_ascii(&self->ug, cache, c, w->pieces.v, npieces, self->ascii_prefix, &w->sc, out,
                                  spans_out);
    if (err < 0)
        return -1;
    *done = c;
    return 0;
}

/* Needs no GIL: pre-tokenizes a stretch of a normalized segment and runs the model. */
static int stretch_ids(Encoder *self, Cache *cache, const uint32_t *s, size_t n, int64_t offset, Work *w, IdBuf *out) {
    if (cps_room(&w->buf, &w->buf_cap, n) < 0)
        return -1;
    memcpy(w->buf, s, n * sizeof *s);
    Pieces p = {.buf = w->buf, .len = n, .cap = w->buf_cap, .spare = w->spare, .spare_cap = w->spare_cap,
                .spans = w->spans, .tmp = w->tmp};
    p.spans.n = 0;
    int err = -1;
    if (!p.spans.cap) {
        if (!(p.spans.v = malloc(16 * sizeof *p.spans.v)))
            goto done;
        p.spans.cap = 16;
    }
    p.spans.v[0] = (Span){0, n, offset};
    p.spans.n = 1;
    if (pretokenize(self->steps, self->nsteps, &p) < 0)
        goto done;
    err = self->model == MODEL_BPE         ? bpe_spans(&self->bpe, cache, p.buf, p.spans.v, p.spans.n, &w->sc, out)
          : self->model == MODEL_WORDPIECE ? wordpiece_spans(&self->wp, cache, p.buf, p.spans.v, p.spans.n, &w->sc, out, NULL)
                                           : unigram_spans(&self->ug, cache, p.buf, p.spans.v, p.spans.n, &w->sc, out, NULL);
done:
    work_keep(w, &p);
    return err;
}

/* Where s[0..n) may be cut before its first ASCII_STRETCH ASCII characters in a row (counted in
 * blocks of 16, the vector compare of each a fraction of what encoding its characters costs):
 * the first cut windowed() allows from there, else n. */
static size_t ascii_stretch_ahead(const uint32_t *s, size_t n) {
    for (size_t i = 0, run = 0; i + 16 <= n; i += 16) {
        run = ascii_blocks(s + i, 16) ? run + 16 : 0;
        if (run < ASCII_STRETCH)
            continue;
        return next_cut(s, n, i + 16 - run);
    }
    return n;
}

/* A window's ASCII stretches by ascii_ids, the others by stretch_ids: after an ASCII stretch, the
 * text from the character that ended it to the first cut windowed() allows ASCII_STRETCH
 * characters on; where other characters come first, the text to the first cut before the next
 * ASCII stretch. English with a few other characters, or after text of another script, keeps
 * most of its text on the ASCII way. */
static int window_ids(Encoder *self, Cache *cache, const uint32_t *s, size_t n, int64_t offset, Work *w, IdBuf *out) {
    if (self->ascii_scanner < 0 || n > INT32_MAX)
        return stretch_ids(self, cache, s, n, offset, w, out);
    while (n) {
        size_t done, ascii, end;
        if (ascii_ids(self, cache, s, n, w, out, NULL, 0, &done, &ascii) < 0)
            return -1;
        if (!done) {
            end = ascii_stretch_ahead(s, n);
            if (stretch_ids(self, cache, s, end, offset, w, out) < 0)
                return -1;
        } else if ((end = done) < n) {
            end = next_cut(s, n, ascii + ASCII_STRETCH < n ? ascii + ASCII_STRETCH : n);
            if (stretch_ids(self, cache, s + done, end - done, offset + (int64_t)done, w, out) < 0)
                return -1;
        }
        s += end;
        n -= end;
        offset += (int64_t)end;
    }
    return 0;
}

/* Pre-tokenized pieces are encoded independently, so a long segment is pre-tokenized and
 * encoded a window at a time: the work buffers (its copy, the pieces' spans, the model's
 * scratch) stay bounded instead of growing to about 20 bytes a character, and small: with
 * windows (and parts) of 64K characters, their megabyte of buffers beyond the second-level
 * cache, 400 KB of documents in one string encoded at 0.74x the documents' rate (llama3, warm),
 * with 8K 0.85x, with 2K no faster. */
#define WINDOW ((size_t)1 << 13)

/* Whether a window may end before any space that has an ASCII letter or digit on either side.
 * Such a space starts a piece for the first steps below, whose scanners decide each piece
 * from the text after it, looking at most to the end of the letter, digit or space run it
 * belongs to, so the pieces before the cut and after it come out as in one pass (the later
 * steps only cut and prefix the first step's pieces, one by one). A first step that may run
 * a piece across such a space (a Split with another pattern, Metaspace without split) or
 * prefix the text's first piece (ByteLevel without its regex) is not windowed. */
static int windowed(const Encoder *self) {
    if (!self->nsteps)
        return 0;
    const Step *st = &self->steps[0];
    switch (st->kind) {
    case ST_SPLIT:
        /* the space starts a match of these and the match before ends there, whatever is kept;
         * the behaviors that join segments may join across it */
        if (st->behavior != BH_ISOLATED && st->behavior != BH_REMOVED)
            return 0;
        return st->scanner == SC_GPT2 || st->scanner == SC_CL100K || st->scanner == SC_QWEN2 ||
               st->scanner == SC_O200K || st->scanner == SC_WORDS ||
               (st->scanner == SC_DELIMITER && st->delimiter == ' ');
    case ST_BYTE_LEVEL:
        return st->use_regex;
    case ST_METASPACE:
        return st->split;
    case ST_SCRIPTS: /* a space has no script: it joins the letters around it */
        return 0;
    default: /* ST_BERT, ST_WHITESPACE_SPLIT: a space always ends a piece */
        return 1;
    }
}

/* The end of the window starting at `a` (a cut as windowed() describes, near a + WINDOW when
 * there is one there, else the first one after), or n when there is none. */
static size_t window_end(const uint32_t *s, size_t a, size_t n) {
    for (size_t c = a + WINDOW; c > a + WINDOW / 2; c--)
        if (ascii_cut_ok(s, n, c))
            return c;
    return next_cut(s, n, a + WINDOW + 1);
}

static int segment_ids(Encoder *self, Cache *cache, const uint32_t *s, size_t n, int64_t offset, Work *w, IdBuf *out) {
    if (self->model == MODEL_BPE && !self->nsteps) {
        /* one piece, which the pre-tokenizer would not touch: no copy */
        Span whole = {0, n, offset};
        return bpe_spans(&self->bpe, cache, s, &whole, 1, &w->sc, out);
    }
    size_t a = 0;
    if (n - a > WINDOW + 1 && windowed(self)) {
        for (size_t c; n - a > WINDOW + 1 && (c = window_end(s, a, n)) < n; a = c)
            if (window_ids(self, cache, s + a, c - a, offset + (int64_t)a, w, out) < 0)
                return -1;
    }
    return window_ids(self, cache, s + a, n - a, offset + (int64_t)a, w, out);
}

static int encode_segment(Encoder *self, const uint32_t *s, size_t n, int64_t offset, Work *w, IdBuf *out) {
    Cache *cache = cache_enter(&self->cache);
    int err = segment_ids(self, cache, s, n, offset, w, out);
    cache_leave(&self->cache, cache);
    return err;
}

/* The normalizer steps of a text's parts: the first part's, and the later parts' (no Prepend:
 * it only starts a segment, which a cut between parts does not). */
typedef struct {
    const NormOp *ops;
    size_t nops;
    NormOp *rest;
    size_t nrest;
} PartOps;

/* The steps on the text's first segment in[0..n), as normalize_ops, with *at the offset its
 * characters count from (normalizers.normalize_first): 1 - the number of them that come from the
 * text's first character. -2 where only the pure normalizer knows the alignment. */
static int normalize_first(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, Work *w,
                           const uint32_t **res, size_t *res_n, int64_t *at) {
    const uint32_t *align;
    int err;
    if (nops == 1 && ops[0].kind == NORM_BERT) {
        if ((err = bert_normalize(ops[0].flags, in, n, &w->norm[0], &w->norm[1], w->align)))
            return err;
        *res = w->norm[1].v;
        *res_n = w->norm[1].n;
        align = w->align[1].v;
    } else if ((err = normalize_aligned(ops, nops, in, n, w->norm, w->align, res, res_n, &align))) {
        return err == -3 ? -2 : err;
    }
    size_t k = 0;
    while (k < *res_n && (align ? align[k] : k) == 0)
        k++;
    *at = 1 - (int64_t)k;
    return 0;
}

/* Encode a text, or the part of one at `origin`, needing no GIL: raw added tokens, each
 * segment between them through the native normalizer steps, normalized added tokens, segments.
 * *open says whether the part before this one ended inside a segment, which this part's first
 * continues, and is set to whether this one does. Returns 0, -1 when out of memory, -2 when a
 * normalizer step needs the pure path (the caller redoes the text with it). */
static int part_segments(Encoder *self, Cache *cache, const PartOps *po, const uint32_t *cps, size_t n, size_t origin,
                         int *open, Work *w, IdBuf *out) {
    if (added_split(&self->raw, cps, n, &w->cuts) < 0)
        return -1;
    for (size_t k = 0; k < w->cuts.n; k++) {
        AddedCut c = w->cuts.v[k];
        if (c.id >= 0) {
            if (ids_push(out, c.id) < 0)
                return -1;
            continue;
        }
        const uint32_t *seg = cps + c.start;
        size_t len = c.stop - c.start;
        int continued = *open && c.start == 0;
        const NormOp *ops = continued ? po->rest : po->ops;
        size_t nops = continued ? po->nrest : po->nops;
        int64_t at = (int64_t)(origin + c.start);
        if (nops && self->first && at == 0) {
            int err = normalize_first(ops, nops, seg, len, w, &seg, &len, &at);
            if (err)
                return err;
        } else if (nops) {
            int err = normalize_ops(ops, nops, seg, len, w->norm, &seg, &len);
            if (err)
                return err;
        }
        if (!len)
            continue;
        if (!self->norm.ntokens) {
            if (segment_ids(self, cache, seg, len, at, w, out) < 0)
                return -1;
            continue;
        }
        if (added_split(&self->norm, seg, len, &w->sub) < 0)
            return -1;
        for (size_t j = 0; j < w->sub.n; j++) {
            AddedCut d = w->sub.v[j];
            if (d.id >= 0 ? ids_push(out, d.id) < 0
                          : segment_ids(self, cache, seg + d.start, d.stop - d.start, at + (int64_t)d.start, w, out) < 0)
                return -1;
        }
    }
    *open = w->cuts.n && w->cuts.v[w->cuts.n - 1].id < 0;
    return 0;
}

/* part_segments inside the piece cache: entered once for all the part's segments, as the count
 * of those inside is one cache line every thread writes (entered for each segment, of which a
 * text between many added tokens has hundreds, it was a fifth of Gemma's time on 2 threads). */
static int encode_part(Encoder *self, const PartOps *po, const uint32_t *cps, size_t n, size_t origin, int *open,
                       Work *w, IdBuf *out) {
    if (!n)
        return 0;
    Cache *cache = cache_enter(&self->cache);
    int err = part_segments(self, cache, po, cps, n, origin, open, w, out);
    cache_leave(&self->cache, cache);
    return err;
}

static int encode_text_core(Encoder *self, const NormOp *ops, size_t nops, const uint32_t *cps, size_t n,
                            Work *w, IdBuf *out) {
    PartOps po = {ops, nops, NULL, 0};
    int open = 0;
    return encode_part(self, &po, cps, n, 0, &open, w, out);
}

/* The Python int of an id: model ids from the table, added token ids may lie beyond. */
static PyObject *ints_get(Ints t, size_t id) {
    PyObject *o = id < t.n ? t.v[id] : NULL;
    if (o)
        return Py_NewRef(o);
    if ((o = PyLong_FromSize_t(id)) && id < t.n)
        t.v[id] = Py_NewRef(o);
    return o;
}

/* list[at..at+n) set to the ids' ints; on an error, every item from the one that failed to the
 * list's end NULL, which its dealloc skips (the items need not be set before). */
static int set_ids(Ints t, PyObject *list, Py_ssize_t at, const IdBuf *ids) {
    size_t i = 0, n = ids->n;
    /* the table slots and int objects of a large vocabulary miss the caches: fetched ahead, an id
     * beyond the table as id 0 and an int not made yet as NULL (a prefetch never faults), which
     * saves the branches on them */
    for (; t.n && i + 16 < n; i++) {
        size_t slot = (size_t)ids->v[i + 16], obj = (size_t)ids->v[i + 8];
        __builtin_prefetch(&t.v[slot < t.n ? slot : 0]);
        __builtin_prefetch(t.v[obj < t.n ? obj : 0], 1);
        PyObject *o = ints_get(t, (size_t)ids->v[i]);
        if (!o)
            goto fail;
        PyList_SET_ITEM(list, at + (Py_ssize_t)i, o);
    }
    for (; i < n; i++) {
        PyObject *o = ints_get(t, (size_t)ids->v[i]);
        if (!o)
            goto fail;
        PyList_SET_ITEM(list, at + (Py_ssize_t)i, o);
    }
    return 0;
fail:
    memset(((PyListObject *)list)->ob_item + at + i, 0, (size_t)(Py_SIZE(list) - at - (Py_ssize_t)i) * sizeof(PyObject *));
    return -1;
}

static const IdBuf no_ids = {0};

/* The ids most texts of n characters have (a token for every four characters): room made for
 * them at once rather than grown to them from nothing. */
static size_t ids_expected(size_t n) { return n / 4 + 16; }

/* Room in list for `need` items: its items' memory grown to that, or by half when that is
 * more (not by an eighth, as CPython grows lists, each growth a copy of the list). */
static int list_room(PyObject *list, size_t need) {
    PyListObject *l = (PyListObject *)list;
    size_t cap = (size_t)l->allocated;
    if (need <= cap)
        return 0;
    cap = need > cap + cap / 2 ? need : cap + cap / 2;
    PyObject **items = cap <= PY_SSIZE_T_MAX / sizeof *items ? PyMem_Realloc(l->ob_item, cap * sizeof *items) : NULL;
    if (!items) {
        PyErr_NoMemory();
        return -1;
    }
    l->ob_item = items;
    l->allocated = (Py_ssize_t)cap;
    return 0;
}

/* ids appended to list, which a long text's parts grow as they come: set in its own items
 * rather than through a list of each part spliced in (a reference taken and given back for
 * every id). */
static int list_extend(Ints t, PyObject *list, const IdBuf *ids) {
    size_t at = (size_t)Py_SIZE(list);
    if (!ids->n)
        return 0;
    if (list_room(list, at + ids->n) < 0)
        return -1;
    Py_SET_SIZE(list, (Py_ssize_t)(at + ids->n));
    return set_ids(t, list, (Py_ssize_t)at, ids);
}

/* Room in a list that a long text's parts fill, before `more` ids of a part ending at
 * character b of n are added: where it is short, as many ids as the characters so far gave,
 * for all n and a thirty-second more, rather than half again (each growth a copy of the list) */
static int list_project(PyObject *list, size_t more, size_t b, size_t n) {
    size_t have = (size_t)Py_SIZE(list) + more;
    if (have <= (size_t)((PyListObject *)list)->allocated)
        return 0;
    double projected = b && b < n ? (double)have * ((double)n / (double)b) * (33.0 / 32.0) : (double)have;
    return list_room(list, projected < (double)(PY_SSIZE_T_MAX / sizeof(PyObject *)) ? (size_t)projected : have);
}

/* A list grown by list_room given back the room it did not use, past half its items (room
 * never written, which takes no memory but its addresses). Not less: glibc maps a block as
 * large as the largest it freed afresh (its dynamic mmap threshold follows the size freed), so
 * a list shrunk below the size it was asked for makes the next such list's growth map new
 * pages and fault each in (a 3 MB text encoded again: a fifteenth of its time, every call). */
static void list_fit(PyObject *list) {
    PyListObject *l = (PyListObject *)list;
    size_t n = (size_t)Py_SIZE(list);
    if ((size_t)l->allocated <= n + n / 2 || !n)
        return;
    PyObject **items = PyMem_Realloc(l->ob_item, n * sizeof *items);
    if (items) {
        l->ob_item = items;
        l->allocated = (Py_ssize_t)n;
    }
}

/* The ids as a Python list within pre and suf; an empty one, as most post-processors leave at
 * one end at least, is not visited. The list's room is made by list_room, not PyList_New(n),
 * which zeroes it: a pass over a long list before set_ids' own. */
static PyObject *ids_within(Ints t, const IdBuf *pre, const IdBuf *ids, const IdBuf *suf) {
    size_t n = pre->n + ids->n + suf->n;
    PyObject *list = PyList_New(0);
    if (!list || list_room(list, n) < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    Py_SET_SIZE(list, (Py_ssize_t)n);
    if ((pre->n && set_ids(t, list, 0, pre) < 0) || set_ids(t, list, (Py_ssize_t)pre->n, ids) < 0 ||
        (suf->n && set_ids(t, list, (Py_ssize_t)(pre->n + ids->n), suf) < 0))
        Py_CLEAR(list);
    return list;
}

/* The ids as a Python list, within the post-processor's prefix and suffix when `special`. */
static PyObject *id_list(Encoder *self, const IdBuf *ids, int special) {
    return special ? ids_within(self->ints, &self->prefix, ids, &self->suffix)
                   : ids_within(self->ints, &no_ids, ids, &no_ids);
}

static PyObject *Encoder_encode(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode(text: str, offset: int)");
        return NULL;
    }
    if (!self->ints.v) {
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
    Work own, *w = work_take(&own);
    PyThreadState *released = gil_release(n);
    const uint32_t *cps = text_cps(w, kind, data, 0, n);
    int err = !cps ? -1 : encode_segment(self, cps, n, offset, w, &out);
    gil_take(released);
    work_give(w, &own);
    PyObject *list = err ? PyErr_NoMemory() : id_list(self, &out, 0);
    free(out.v);
    return list;
}

#define CUT_RSTRIP ((uint64_t)1 << 42)
#define CUT_WORD_FIRST ((uint64_t)1 << 43)

static int u64_order(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int u64_find(const uint64_t *v, size_t n, uint64_t key) {
    return n && bsearch(&key, v, n, sizeof *v, u64_order) != NULL;
}

/* Whether a text cut between p and q, a space (part_cut_ok), is matched as its two parts are,
 * one after the other: no token holds p before q, none with rstrip ends in p, p is no space an
 * lstrip would take, and no single_word token starts with q after a word character (at a
 * part's start it has none before it; one ending in p has q, no word character, after it in
 * both). */
static int added_cut_ok(const Encoder *self, int trie, uint32_t p, uint32_t q) {
    const uint64_t *v = self->inside[trie];
    size_t n = self->ninside[trie];
    return !rust_white_space(p) && !u64_find(v, n, (uint64_t)p << 21 | q) && !u64_find(v, n, CUT_RSTRIP | p) &&
           !(rust_word(p) && u64_find(v, n, CUT_WORD_FIRST | q));
}

/* keys[0..n) each once, in their first order; the number kept, or -1 without memory. Added
 * tokens share most of their keys (Llama 3's 256 reserved tokens hold some 7,000 character
 * pairs, a few dozen of them different), and sorting the repeats took longer than the rest of
 * the matcher's build. */
static Py_ssize_t u64_unique(uint64_t *keys, size_t n) {
    size_t size = 16;
    while (size < 2 * n)
        size *= 2;
    /* each key + 1 (keys are below 2^44), so that 0 is an empty slot */
    uint64_t *seen = calloc(size, sizeof *seen);
    if (!seen)
        return -1;
    size_t kept = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t key = keys[k] + 1;
        size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (size - 1);
        while (seen[i] && seen[i] != key)
            i = (i + 1) & (size - 1);
        if (!seen[i]) {
            seen[i] = key;
            keys[kept++] = keys[k];
        }
    }
    free(seen);
    return (Py_ssize_t)kept;
}

/* One matcher's tokens: a list of (content, id, ADDED_* flags), later entries winning; inside
 * gets added_cut_ok's keys. */
static int build_added(AddedTrie *t, PyObject *tokens, uint64_t **inside, size_t *ninside) {
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
    free(*inside);
    *ninside = 0;
    /* a key per character: a pair with the next one, or for the last one its rstrip key; one
     * more for a single_word token */
    size_t keys = total + (size_t)PyList_GET_SIZE(tokens);
    if (added_trie_init(t, total) < 0 || !(*inside = malloc((keys ? keys : 1) * sizeof **inside))) {
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
        for (Py_ssize_t k = 0; k + 1 < n; k++)
            (*inside)[(*ninside)++] = (uint64_t)cps[k] << 21 | cps[k + 1];
        if (strip & ADDED_RSTRIP)
            (*inside)[(*ninside)++] = CUT_RSTRIP | cps[n - 1];
        if (strip & ADDED_SINGLE_WORD)
            (*inside)[(*ninside)++] = CUT_WORD_FIRST | cps[0];
        PyMem_Free(cps);
        if (err < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_ssize_t kept = u64_unique(*inside, *ninside);
    if (kept < 0) {
        PyErr_NoMemory();
        return -1;
    }
    *ninside = (size_t)kept;
    qsort(*inside, *ninside, sizeof **inside, u64_order);
    return 0;
}

static PyObject *Encoder_set_added(Encoder *self, PyObject *args) {
    PyObject *raw, *norm;
    if (!PyArg_ParseTuple(args, "OO:set_added", &raw, &norm) ||
        build_added(&self->raw, raw, &self->inside[0], &self->ninside[0]) < 0 ||
        build_added(&self->norm, norm, &self->inside[1], &self->ninside[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Encode text[start, stop) of one segment between raw added tokens with a normalizer only
 * Python can run: normalize it, cut out the normalized added tokens, encode the rest. Offsets
 * are those of AddedVocabulary.split. */
static int encode_between(Encoder *self, PyObject *text, size_t start, size_t stop, PyObject *normalizer,
                          Work *w, IdBuf *out) {
    PyObject *piece = PyUnicode_Substring(text, (Py_ssize_t)start, (Py_ssize_t)stop);
    if (!piece)
        return -1;
    int64_t at = (int64_t)start;
    if (self->first && !start) {
        /* (normalized, the offset it counts from) */
        PyObject *pair = PyObject_CallOneArg(self->first, piece);
        Py_DECREF(piece);
        if (!pair)
            return -1;
        long long base;
        if (!PyArg_ParseTuple(pair, "UL", &piece, &base)) {
            Py_DECREF(pair);
            return -1;
        }
        Py_INCREF(piece);
        Py_DECREF(pair);
        at = base;
    } else if (normalizer != Py_None) {
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
    const void *data = PyUnicode_DATA(piece);
    size_t n = (size_t)PyUnicode_GET_LENGTH(piece);
    int err = read_text(w, kind, data, n);
    Py_DECREF(piece);
    if (!err && n) {
        Py_BEGIN_ALLOW_THREADS
        Cache *cache = cache_enter(&self->cache);
        if (!self->norm.ntokens) {
            err = segment_ids(self, cache, w->text, n, at, w, out);
        } else {
            err = added_split(&self->norm, w->text, n, &w->sub);
            for (size_t j = 0; !err && j < w->sub.n; j++) {
                AddedCut d = w->sub.v[j];
                err = d.id >= 0 ? ids_push(out, d.id)
                                : segment_ids(self, cache, w->text + d.start, d.stop - d.start,
                                              at + (int64_t)d.start, w, out);
            }
        }
        cache_leave(&self->cache, cache);
        Py_END_ALLOW_THREADS
    }
    if (err)
        PyErr_NoMemory();
    return err ? -1 : 0;
}

static PyTypeObject NormalizerType;
/* The native steps of a pymtok._native.Normalizer, or none for None; 0 when the normalizer is
 * some other callable, which only encode_between can run. */
static int native_ops(PyObject *normalizer, const NormOp **ops, size_t *nops);

/* text's ids into out: in one GIL-free pass when the normalizer is native, else segment by
 * segment with the normalizer called in between. */
static int encode_text_into(Encoder *self, PyObject *text, PyObject *normalizer, Work *w, IdBuf *out) {
    const NormOp *ops = NULL;
    size_t nops = 0, n = (size_t)PyUnicode_GET_LENGTH(text), mark = out->n;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    int err = 0;
    if (native_ops(normalizer, &ops, &nops)) {
        PyThreadState *released = gil_release(n);
        const uint32_t *cps = text_cps(w, kind, data, 0, n);
        err = !cps ? -1 : encode_text_core(self, ops, nops, cps, n, w, out);
        gil_take(released);
        if (err == -1) {
            PyErr_NoMemory();
            return -1;
        }
        if (!err)
            return 0;
        out->n = mark; /* -2: redo the text, the normalizer's pure path raising or answering */
    }
    /* w->text is overwritten by each segment below: the cuts come from their own copy */
    uint32_t *cps = n ? PyUnicode_AsUCS4Copy(text) : NULL;
    AddedCuts cuts = {0};
    if (n && !cps)
        return -1;
    if (n && added_split(&self->raw, cps, n, &cuts) < 0) {
        PyErr_NoMemory();
        err = -1;
    } else {
        err = 0;
    }
    for (size_t k = 0; !err && k < cuts.n; k++) {
        AddedCut c = cuts.v[k];
        if (c.id < 0)
            err = encode_between(self, text, c.start, c.stop, normalizer, w, out);
        else if ((err = ids_push(out, c.id)) < 0)
            PyErr_NoMemory();
    }
    PyMem_Free(cps);
    free(cuts.v);
    return err;
}

/* ---- a long text, a part at a time -------------------------------------------------------- */

/* A text longer than this is read from its str, normalized, encoded and its ids put in the list
 * a part of about WINDOW characters at a time: the work buffers stay those of one part, and no
 * buffer of every id is held beside the list. */
#define PARTS_MIN (2 * WINDOW)
#define CUT_MARGIN_MAX 8

/* The characters on each side of a cut that normalize_cut must see: one, and one more for each
 * step that may join a character to its neighbours; 0 for too many such steps. */
static size_t cut_margin(const NormOp *ops, size_t nops) {
    size_t m = 1;
    for (size_t k = 0; k < nops; k++)
        m += ops[k].kind == NORM_NFC || ops[k].kind == NORM_PRECOMPILED;
    return m <= CUT_MARGIN_MAX ? m : 0;
}

/* Whether the text may be cut before s[c], a space, into parts encoded one after the other: the
 * raw added tokens matched as in the whole, the parts normalized as the whole is, the normalized
 * added tokens matched as in it, and its pieces the same: the pre-tokenizer's (windowed()'s
 * cut) or, without one, the BPE model's, which it cuts before U+2581 (bpe_spans). */
static int part_cut_ok(const Encoder *self, const NormOp *ops, size_t nops, size_t m, int kind, const void *data,
                       size_t c) {
    uint32_t t[2 * CUT_MARGIN_MAX + 1];
    for (size_t i = 0; i < 2 * m + 1; i++)
        t[i] = PyUnicode_READ(kind, data, c - m + i);
    if (!added_cut_ok(self, 0, t[m - 1], t[m]) || !normalize_cut(ops, nops, t, m))
        return 0;
    uint32_t p = t[m - 1], q = t[m], r = t[m + 1];
    if (!added_cut_ok(self, 1, p, q))
        return 0;
    if (self->nsteps)
        return windowed(self) && q == ' ' && is_ascii_alnum(p) && is_ascii_alnum(r);
    return self->model == MODEL_BPE && self->bpe.split_metaspace && q == 0x2581 && p != 0x2581;
}

/* The end of the part starting at `a`: a cut near a + WINDOW, else the first one after, else n. */
static size_t part_end(const Encoder *self, const NormOp *ops, size_t nops, size_t m, int kind, const void *data,
                       size_t a, size_t n) {
    if (n - a <= 2 * WINDOW)
        return n;
    for (size_t c = a + WINDOW; c > a + WINDOW / 2; c--)
        if (PyUnicode_READ(kind, data, c) == ' ' && part_cut_ok(self, ops, nops, m, kind, data, c))
            return c;
    for (size_t c = a + WINDOW + 1; c + m < n; c++)
        if (PyUnicode_READ(kind, data, c) == ' ' && part_cut_ok(self, ops, nops, m, kind, data, c))
            return c;
    return n;
}

static size_t find_surrogate(int kind, const void *data, size_t n);
static void raise_surrogate(PyObject *text, size_t at);

/* encode_text's list for a long text with native normalizer steps, a part at a time (each part's
 * ids added to the list as they come, the list grown to what the parts so far project); with
 * `flat`, the ids appended there instead and Py_None for the list. NULL with an error, or with
 * none and *redo set when a step needs the pure path. */
static PyObject *encode_parts(Encoder *self, PyObject *text, const NormOp *ops, size_t nops, int special, Work *w,
                              int *redo, IdBuf *flat) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    size_t n = (size_t)PyUnicode_GET_LENGTH(text), m = cut_margin(ops, nops);
    PartOps po = {ops, nops, malloc((nops ? nops : 1) * sizeof *ops), 0};
    PyObject *list = flat ? Py_NewRef(Py_None) : PyList_New(0);
    IdBuf out = {0};
    if (!po.rest || !list)
        goto fail;
    for (size_t k = 0; k < nops; k++)
        if (ops[k].kind != NORM_PREPEND)
            po.rest[po.nrest++] = ops[k];
    if (flat ? ids_grow(flat, ids_expected(n)) < 0 || (special && ids_extend(flat, self->prefix.v, self->prefix.n) < 0)
             : list_room(list, ids_expected(n)) < 0 || (special && list_extend(self->ints, list, &self->prefix) < 0))
        goto fail;
    int open = 0, err = 0;
    for (size_t a = 0, b; a < n; a = b) {
        out.n = 0;
        PyThreadState *released = gil_release(n - a);
        b = m ? part_end(self, ops, nops, m, kind, data, a, n) : n;
        /* the part's lone surrogate looked for as it is read: the text's characters fetched
         * once, not ahead of all the parts (a 4-byte text twice the second-level cache) */
        size_t bad = find_surrogate(kind, (const char *)data + a * (size_t)kind, b - a);
        const uint32_t *cps = bad < b - a ? NULL : text_cps(w, kind, data, a, b - a);
        err = bad < b - a ? -3 : !cps ? -1 : encode_part(self, &po, cps, b - a, a, &open, w, &out);
        gil_take(released);
        if (err == -3) {
            raise_surrogate(text, a + bad);
            goto fail;
        }
        if (err == -2) {
            *redo = 1;
            goto fail;
        }
        if (err < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        if (flat ? ids_extend(flat, out.v, out.n) < 0
                 : list_project(list, out.n, b, n) < 0 || list_extend(self->ints, list, &out) < 0)
            goto fail;
    }
    if (special && (flat ? ids_extend(flat, self->suffix.v, self->suffix.n) < 0
                         : list_extend(self->ints, list, &self->suffix) < 0))
        goto fail;
    if (!flat)
        list_fit(list);
    free(po.rest);
    free(out.v);
    return list;
fail:
    /* the flat buffer's growth is the one failure that has not raised (a redo raises nothing) */
    if (flat && !*redo && !PyErr_Occurred())
        PyErr_NoMemory();
    free(po.rest);
    free(out.v);
    Py_XDECREF(list);
    return NULL;
}

/* The first surrogate of a 2- or 4-byte str's code units: 64 bytes of units tested at a time
 * (unsigned wrap-around puts every non-surrogate at or above 0x800 after the subtraction), the
 * unit then found in its block. */
#define FIND_SURROGATE(T, LANES)                                                                   \
    static size_t find_surrogate_##T(const T *p, size_t n) {                                     \
        typedef T vec __attribute__((vector_size(16)));                                            \
        size_t i = 0;                                                                              \
        for (; i + 4 * LANES <= n; i += 4 * LANES) {                                               \
            vec hit = {0};                                                                         \
            for (size_t k = 0; k < 4 * LANES; k += LANES) {                                        \
                vec v;                                                                             \
                memcpy(&v, p + i + k, sizeof v);                                                   \
                hit |= (vec)(v - (T)0xD800) < (T)0x800;                                            \
            }                                                                                      \
            uint64_t lo, hi;                                                                       \
            memcpy(&lo, &hit, 8);                                                                  \
            memcpy(&hi, (char *)&hit + 8, 8);                                                      \
            if (lo | hi)                                                                           \
                break;                                                                             \
        }                                                                                          \
        for (; i < n; i++)                                                                         \
            if ((T)(p[i] - 0xD800) < 0x800)                                                        \
                return i;                                                                          \
        return n;                                                                                  \
    }
FIND_SURROGATE(uint16_t, 8)
FIND_SURROGATE(uint32_t, 4)

/* The first lone surrogate of a str (no UTF-8 form), or n. */
static size_t find_surrogate(int kind, const void *data, size_t n) {
    if (kind == PyUnicode_1BYTE_KIND)
        return n;
    return kind == PyUnicode_2BYTE_KIND ? find_surrogate_uint16_t(data, n) : find_surrogate_uint32_t(data, n);
}

/* encode()'s error for a text holding a lone surrogate at `at` (tokenizer._check_encodable). */
static void raise_surrogate(PyObject *text, size_t at) {
    PyObject *ch = PyUnicode_Substring(text, (Py_ssize_t)at, (Py_ssize_t)at + 1);
    if (ch) {
        PyErr_Format(PyExc_ValueError, "text holds a lone surrogate %R at index %zu; it has no UTF-8 form to tokenize",
                     ch, at);
        Py_DECREF(ch);
    }
}

/* The length of a text to encode in *n, or -1 with raise_surrogate's error. */
static int encodable_length(PyObject *text, size_t *n) {
    *n = (size_t)PyUnicode_GET_LENGTH(text);
    size_t at = find_surrogate(PyUnicode_KIND(text), PyUnicode_DATA(text), *n);
    if (at < *n) {
        raise_surrogate(text, at);
        return -1;
    }
    return 0;
}

/* ids within the post-processor's prefix and suffix when `special`, as 4-byte unsigned ints in a
 * bytearray (the ids are below 2**31: their int32 bytes are the same) */
static PyObject *id_bytes(Encoder *self, const IdBuf *ids, int special) {
    const IdBuf *pre = special ? &self->prefix : &no_ids, *suf = special ? &self->suffix : &no_ids;
    size_t n = pre->n + ids->n + suf->n;
    if (n > (size_t)PY_SSIZE_T_MAX / sizeof(int32_t))
        return PyErr_NoMemory();
    PyObject *bytes = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int32_t)));
    if (!bytes)
        return NULL;
    char *to = PyByteArray_AS_STRING(bytes);
    /* ids or an affix may be NULL when empty, which memcpy does not allow */
    const IdBuf *parts[3] = {pre, ids, suf};
    for (int k = 0; k < 3; k++) {
        if (parts[k]->n)
            memcpy(to, parts[k]->v, parts[k]->n * sizeof(int32_t));
        to += parts[k]->n * sizeof(int32_t);
    }
    return bytes;
}

/* encode_text and encode_u32: the ids as a list of ints, or (u32) id_bytes' bytearray */
static PyObject *encode_text_as(Encoder *self, PyObject *const *args, Py_ssize_t nargs, int u32) {
    int special;
    /* the normalizer first, so that native.py binds it with functools.partial: a Python
     * wrapper would cost a frame on every encode */
    if (nargs != 3 || !PyUnicode_Check(args[1]) || (special = PyObject_IsTrue(args[2])) < 0) {
        PyErr_Format(PyExc_TypeError, "%s(normalizer: callable | None, text: str, add_special_tokens: bool)",
                     u32 ? "encode_u32" : "encode_text");
        return NULL;
    }
    if (!self->ints.v) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is not initialised");
        return NULL;
    }
    PyObject *text = args[1];
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    Work own, *w = work_take(&own);
    const NormOp *ops;
    size_t nops;
    /* encode_parts looks for a lone surrogate in each part as it reads it; the other paths look
     * for one first */
    if (n >= PARTS_MIN && native_ops(args[0], &ops, &nops)) {
        int redo = 0;
        IdBuf flat = {0};
        PyObject *list = encode_parts(self, text, ops, nops, special, w, &redo, u32 ? &flat : NULL);
        if (list && u32)
            Py_SETREF(list, id_bytes(self, &flat, 0));
        free(flat.v);
        if (list || !redo) {
            work_give(w, &own);
            return list;
        }
    }
    if (encodable_length(text, &n) < 0) {
        work_give(w, &own);
        return NULL;
    }
    /* the ids into the Work's buffer: the result is made before the Work is given back */
    IdBuf *out = &w->out;
    out->n = 0;
    size_t expected = ids_expected(n);
    int err = out->cap < expected && ids_grow(out, expected) < 0 ? -1 : encode_text_into(self, text, args[0], w, out);
    PyObject *result = err ? NULL : u32 ? id_bytes(self, out, special) : id_list(self, out, special);
    work_give(w, &own);
    if (err && !PyErr_Occurred())
        PyErr_NoMemory();
    return result;
}

static PyObject *Encoder_encode_text(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    return encode_text_as(self, args, nargs, 0);
}

static PyObject *Encoder_encode_u32(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    return encode_text_as(self, args, nargs, 1);
}

/* ---- offsets ------------------------------------------------------------------------------ */

/* An added token's id and offsets: the text it matched, which its token string is in HF;
 * s[0..n) stands for the caller's characters at + align[0] .. at + align[n - 1] (align NULL: at..). */
static int added_offsets(IdBuf *ids, IdBuf *offs, int32_t id, const uint32_t *s, size_t n, int64_t at,
                         const uint32_t *align, int trim) {
    size_t lead = 0, trail = 0;
    if (trim != OFF_NO_TRIM)
        offsets_spaces(s, n, &lead, &trail);
    if (ids_push(ids, id) < 0)
        return -1;
    int64_t start = at + (align ? align[0] : 0), end = at + (align ? align[n - 1] + 1 : (int64_t)n);
    return offsets_push(offs, start, end, lead, trail, trim, offs->n / 2);
}

/* A WordPiece or Unigram piece's untrimmed spans of buf's characters into o (two an id), kept
 * beside its cache entry where its ids came from one: placed by its tokens' lengths where they
 * tile it (lengths_spans), else by their bytes, WordPiece's lengths (piece_offsets), Unigram's
 * from the model run again (two unknown or byte tokens among them, more tokens than
 * lengths_spans takes). */
static int piece_spans(Encoder *self, Cache *cache, const uint32_t *buf, int64_t prefix, const Word *piece,
                       const int32_t *ids, Work *w, int32_t *o) {
    size_t m = piece->nids, used = 0;
    IdBuf again = {0}, ranges = {0}, spans = {0};
    uint32_t *chars = NULL;
    int placed = lengths_spans(&self->offl, piece, ids, o) == 0, err = 0;
    if (!placed && self->model == MODEL_UNIGRAM) {
        err = !piece->nb ? -2 : unigram_piece_ranges(&self->ug, w->sc.bytes + piece->b, piece->nb, &w->sc, &again, &ranges);
        if (!err && (again.n != m || memcmp(again.v, ids, m * sizeof *ids)))
            err = -2;
    }
    const uint32_t *cps = buf + piece->c;
    if (!placed && !err && prefix >= 0) {
        /* the key's characters, which buf holds but for the prefix */
        if (!(chars = malloc(piece->nc * sizeof *chars)))
            err = -1;
        else {
            chars[0] = (uint32_t)prefix;
            memcpy(chars + 1, buf + piece->c, (piece->nc - 1) * sizeof *chars);
            cps = chars;
        }
    }
    if (!placed && !err) {
        err = piece_offsets(&self->offl, cps, piece->nc, (int64_t)piece->c, NULL, ids, m,
                            self->model == MODEL_UNIGRAM ? ranges.v : NULL, &spans, &used);
        if (!err && (used != m || spans.n != 2 * m))
            err = -2;
        if (!err)
            memcpy(o, spans.v, 2 * m * sizeof *o);
    }
    if (!err && piece->entry && piece->entry->nids == m)
        cache_spans_put(cache, piece->entry, (int32_t)piece->c, o);
    free(chars);
    free(again.v);
    free(ranges.v);
    free(spans.v);
    return err;
}

/* The spans of a segment's ids[mark..) in the caller's text, from the model's words in w->sc over
 * buf (and, for WordPiece and Unigram, their spans of buf in w->rel): segment_offsets'. prefix:
 * the character unigram_ascii put before each piece's key (-1 none), whose spans count it. */
static int segment_spans(Encoder *self, Cache *cache, const uint32_t *buf, int64_t prefix, int64_t origin,
                         const uint32_t *align, int trim, Work *w, IdBuf *ids, size_t mark, IdBuf *offs) {
    if (self->model == MODEL_BPE)
        return spans_offsets(&self->offl, buf, w->sc.words, w->sc.nwords, origin, align, ids->v + mark, ids->n - mark,
                             trim, offs);
    IdBuf *rel = &w->rel;
    int err = 0;
    size_t first = 0, nids = ids->n - mark; /* a piece's first id, of the segment's */
    for (size_t k = 0; !err && k < w->sc.nwords; first += w->sc.words[k++].nids) {
        const Word *piece = &w->sc.words[k];
        if (piece->spanned)
            continue;
        err = !piece->nids || piece->nids > nids - first
                  ? -2
                  : piece_spans(self, cache, buf, prefix, piece, ids->v + mark + first, w, rel->v + 2 * first);
    }
    if (err || first != nids)
        return err ? err : -2;
    /* HF aligns a prepended character to the one it stands before: a token of the prefix alone
     * spans the piece's first character, one that starts with it starts there */
    first = 0;
    for (size_t k = 0; prefix >= 0 && k < w->sc.nwords; first += w->sc.words[k++].nids) {
        int32_t c = (int32_t)w->sc.words[k].c, *o = rel->v + 2 * first;
        for (size_t j = 0; j < w->sc.words[k].nids; j++) {
            o[2 * j] = o[2 * j] > c ? o[2 * j] - 1 : c;
            o[2 * j + 1] = o[2 * j + 1] > c + 1 ? o[2 * j + 1] - 1 : c + 1;
        }
    }
    return spans_map(rel->v, nids, origin, align, offs);
}

/* segment_ids piece by piece, each piece's tokens located in it: s[i] is the caller's character
 * origin + align[i] (origin + i without align), a character a step added (Metaspace's) that of
 * the one it stands before. `at` is segment_ids' offset of s[0]. */
static int segment_offsets(Encoder *self, Cache *cache, const uint32_t *s, size_t n, int64_t origin, int64_t at,
                           const uint32_t *align, int trim, Work *w, IdBuf *ids, IdBuf *offs) {
    /* WordPiece's and Unigram's token strings are not their text (a "##", an unknown token):
     * trimming, which reads them, is the pure path's */
    if (self->model != MODEL_BPE && trim != OFF_NO_TRIM)
        return -2;
    Span whole = {0, n, at};
    const uint32_t *buf = s;
    const Span *spans = &whole;
    size_t nspans = 1, mark = ids->n;
    /* a WordPiece or Unigram piece's spans of buf (a piece of one WordPiece token's given with
     * its ids), then those of the caller's text */
    IdBuf *rel = &w->rel;
    rel->n = 0;
    size_t done, ascii;
    int err = ascii_ids(self, cache, s, n, w, ids, rel, 1, &done, &ascii);
    if (err || done)
        return err < 0 ? -1
                       : segment_spans(self, cache, s, self->ascii_prefix, origin, align, trim, w, ids, mark, offs);
    Pieces p = {0};
    if (self->nsteps) {
        err = -1;
        if (cps_room(&w->buf, &w->buf_cap, n) < 0)
            return -1;
        memcpy(w->buf, s, n * sizeof *s);
        p = (Pieces){.buf = w->buf, .len = n, .cap = w->buf_cap, .spare = w->spare, .spare_cap = w->spare_cap,
                     .spans = w->spans, .tmp = w->tmp, .track = 1};
        if (!p.spans.cap) {
            if (!(p.spans.v = malloc(16 * sizeof *p.spans.v)))
                goto done;
            p.spans.cap = 16;
        }
        p.spans.v[0] = whole;
        p.spans.n = 1;
        if (pretokenize(self->steps, self->nsteps, &p) < 0)
            goto done;
        buf = p.buf;
        spans = p.spans.v;
        nspans = p.spans.n;
        if (p.at) {
            /* the rebuilt buffer's characters, each the caller's through the normalizer's */
            for (size_t i = 0; align && i < p.len; i++)
                p.at[i] = align[p.at[i]];
            align = p.at;
        }
    }
    /* the model on all pieces at once, as segment_ids: each piece's tokens are those whose
     * lengths add up to it */
    err = self->model == MODEL_BPE         ? bpe_spans(&self->bpe, cache, buf, spans, nspans, &w->sc, ids)
          : self->model == MODEL_WORDPIECE ? wordpiece_spans(&self->wp, cache, buf, spans, nspans, &w->sc, ids, rel)
                                           : unigram_spans(&self->ug, cache, buf, spans, nspans, &w->sc, ids, rel);
    if (!err)
        err = segment_spans(self, cache, buf, -1, origin, align, trim, w, ids, mark, offs);
done:
    if (self->nsteps) {
        free(p.at);
        work_keep(w, &p);
    }
    return err;
}

/* The spans offs[from..) of a text normalized by normalize_shifted and located as if its
 * character i were the caller's base - shift + i: those of the characters before base (the
 * prepended ones, which HF aligns to base's character) moved to it. */
static void shifted_spans(IdBuf *offs, size_t from, int64_t base) {
    for (size_t i = from; i < offs->n && offs->v[i] < base; i += 2) {
        offs->v[i] = (int32_t)base;
        if (offs->v[i + 1] <= base)
            offs->v[i + 1] = (int32_t)base + 1;
    }
}

/* encode_text_core with each token's offsets: 0, -1 out of memory, -2 when the pure path must
 * answer (a token of unknown length; a normalizer other than BertNormalizer, NFC, Prepend and
 * one-character Replace that changed the text, whose alignment only the pure path follows). */
static int offsets_segments(Encoder *self, Cache *cache, const NormOp *ops, size_t nops, const uint32_t *cps, size_t n,
                            int trim, Work *w, IdBuf *ids, IdBuf *offs) {
    if (added_split(&self->raw, cps, n, &w->cuts) < 0)
        return -1;
    for (size_t k = 0; k < w->cuts.n; k++) {
        AddedCut c = w->cuts.v[k];
        const uint32_t *seg = cps + c.start, *align = NULL;
        size_t len = c.stop - c.start, shift = 0, from = offs->n;
        int err;
        if (c.id >= 0) {
            if ((err = added_offsets(ids, offs, c.id, seg, len, c.start, NULL, trim)))
                return err;
            continue;
        }
        if (nops == 1 && ops[0].kind == NORM_BERT) {
            if ((err = bert_normalize(ops[0].flags, seg, len, &w->norm[0], &w->norm[1], w->align)))
                return err;
            seg = w->norm[1].v;
            len = w->norm[1].n;
            align = w->align[1].v;
        } else if (nops == 1 && ops[0].kind == NORM_NFC) {
            if ((err = nfc_aligned(seg, len, &w->norm[2], &w->norm[0], &w->align[0])) < 0)
                return err;
            if (!err) {
                seg = w->norm[0].v;
                len = w->norm[0].n;
                align = w->align[0].v;
            }
        } else if (nops) {
            const uint32_t *res, *res_align = NULL;
            size_t res_n;
            /* untrimmed, a shift stands for the alignment: spans then need no array to read, and
             * only those of the prepended characters a fix (trimming would move them first) */
            err = trim == OFF_NO_TRIM ? normalize_shifted(ops, nops, seg, len, w->norm, &res, &res_n, &shift) : -3;
            if (err == -3)
                err = normalize_aligned(ops, nops, seg, len, w->norm, w->align, &res, &res_n, &res_align);
            if (err == -3) {
                /* another normalizer: its alignment is the pure path's to follow, where it changes
                 * the text */
                if ((err = normalize_ops(ops, nops, seg, len, w->norm, &res, &res_n)))
                    return err;
                if (res_n != len || (len && memcmp(res, seg, len * sizeof *seg)))
                    return -2;
            } else if (err) {
                return err;
            } else {
                seg = res;
                len = res_n;
                align = res_align;
            }
        }
        if (!len)
            continue;
        /* Metaspace's "first": the offset the characters from the text's first one end at 0 */
        int64_t first = (int64_t)c.start, origin = (int64_t)c.start - (int64_t)shift;
        if (self->first && !c.start) {
            size_t k = 0;
            while (k < len && (align ? align[k] : k > shift ? k - shift : 0) == 0)
                k++;
            first = 1 - (int64_t)k;
        }
        if (!self->norm.ntokens) {
            if ((err = segment_offsets(self, cache, seg, len, origin, first, align, trim, w, ids, offs)))
                return err;
            if (shift)
                shifted_spans(offs, from, (int64_t)c.start);
            continue;
        }
        if (added_split(&self->norm, seg, len, &w->sub) < 0)
            return -1;
        for (size_t j = 0; j < w->sub.n; j++) {
            AddedCut d = w->sub.v[j];
            const uint32_t *sub_align = align ? align + d.start : NULL;
            int64_t at = align ? origin : origin + (int64_t)d.start;
            err = d.id >= 0 ? added_offsets(ids, offs, d.id, seg + d.start, d.stop - d.start, at, sub_align, trim)
                            : segment_offsets(self, cache, seg + d.start, d.stop - d.start, at,
                                              first + (int64_t)d.start, sub_align, trim, w, ids, offs);
            if (err)
                return err;
        }
        if (shift)
            shifted_spans(offs, from, (int64_t)c.start);
    }
    return 0;
}

/* offsets_segments inside the piece cache, entered once for all its segments (encode_part) */
static int offsets_text_core(Encoder *self, const NormOp *ops, size_t nops, const uint32_t *cps, size_t n, int trim,
                             Work *w, IdBuf *ids, IdBuf *offs) {
    if (!n)
        return 0;
    Cache *cache = cache_enter(&self->cache);
    int err = offsets_segments(self, cache, ops, nops, cps, n, trim, w, ids, offs);
    cache_leave(&self->cache, cache);
    return err;
}

static int32_t *lengths_copy(PyObject *b, size_t *n) {
    Py_ssize_t size = PyBytes_GET_SIZE(b);
    if (size % (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "lengths must be int32 values as bytes");
        return NULL;
    }
    int32_t *v = malloc(size ? (size_t)size : 1);
    if (!v) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(v, PyBytes_AS_STRING(b), (size_t)size);
    *n = (size_t)size / sizeof(int32_t);
    return v;
}

/* Whether every unit of a piece gives the BPE a token (OffsetLengths.tiles): without an unk
 * token, one it has no token for (nor byte tokens) is dropped, and HF places the tokens after it
 * by their lengths, short of the piece's end. */
static int bpe_tiles(const BPE *m) {
    if (m->unk_id >= 0)
        return 1;
    const int32_t *units = m->byte_level ? m->byte_unit : m->byte_fallback ? m->fallback : NULL;
    for (int b = 0; units && b < 256; b++)
        if (units[b] < 0 || (m->byte_level && m->suffix_len && m->end_unit[b] < 0))
            return 0;
    return units != NULL;
}

static PyObject *Encoder_set_offsets(Encoder *self, PyObject *args) {
    PyObject *first, *cont, *chars = Py_None, *edges = Py_None;
    int unk_whole;
    if (!PyArg_ParseTuple(args, "SOi|OO:set_offsets", &first, &cont, &unk_whole, &chars, &edges))
        return NULL;
    if ((cont != Py_None && !PyBytes_Check(cont)) || (chars != Py_None && !PyBytes_Check(chars)) ||
        (edges != Py_None && !PyBytes_Check(edges))) {
        PyErr_SetString(PyExc_TypeError, "set_offsets: cont, chars and edges must be bytes or None");
        return NULL;
    }
    if (edges != Py_None && !(self->model == MODEL_BPE && self->bpe.byte_level)) {
        PyErr_SetString(PyExc_ValueError, "set_offsets: edges are a byte-level BPE's");
        return NULL;
    }
    if (chars != Py_None && self->model == MODEL_WORDPIECE) {
        PyErr_SetString(PyExc_ValueError, "set_offsets: WordPiece has no lengths in characters");
        return NULL;
    }
    if ((self->model == MODEL_WORDPIECE) != (cont != Py_None)) {
        PyErr_SetString(PyExc_ValueError,
                        "set_offsets: BPE and Unigram take lengths, WordPiece lengths and cont lengths");
        return NULL;
    }
    for (size_t k = 0; k < self->nsteps; k++) {
        const Step *st = &self->steps[k];
        if (st->kind == ST_BYTE_LEVEL && st->add_prefix_space) {
            PyErr_SetString(PyExc_ValueError, "set_offsets: a step that rebuilds the text has no native offsets");
            return NULL;
        }
    }
    size_t n, ncont = 0, nchars = 0, nedges = 0;
    int32_t *a = lengths_copy(first, &n), *b = NULL, *c = NULL, *e = NULL;
    if (!a || (cont != Py_None && !(b = lengths_copy(cont, &ncont))) ||
        (chars != Py_None && !(c = lengths_copy(chars, &nchars))) ||
        (edges != Py_None && !(e = lengths_copy(edges, &nedges)))) {
        free(a);
        free(b);
        free(c);
        return NULL;
    }
    if ((b && ncont != n) || (c && nchars != n) || (e && nedges != n)) {
        free(a);
        free(b);
        free(c);
        free(e);
        PyErr_SetString(PyExc_ValueError, "set_offsets: the tables of lengths differ in size");
        return NULL;
    }
    offsets_lengths_free(&self->offl);
    self->offl = (OffsetLengths){.first = a, .cont = b, .n = n, .byte_level = self->model == MODEL_BPE && self->bpe.byte_level,
                                 .unk_whole = self->model == MODEL_WORDPIECE ? unk_whole : -1,
                                 .tiles = self->model == MODEL_BPE && bpe_tiles(&self->bpe)};
    /* a byte-fallback token the model emits (one byte long) starts a character or continues one */
    for (int byte = 0; c && self->model == MODEL_BPE && self->bpe.byte_fallback && byte < 256; byte++) {
        int32_t id = self->bpe.fallback[byte];
        if (id >= 0 && (size_t)id < n && a[id] == 1)
            c[id] = offsets_partial((byte & 0xC0) != 0x80, (byte & 0xC0) == 0x80);
    }
    int err = offsets_lengths_init(&self->offl, c) < 0 || (e && offsets_edges_init(&self->offl, e) < 0) ||
                      cache_side_init(&self->cache) < 0
                  ? -1
                  : 0;
    free(c);
    free(e);
    if (err < 0) {
        offsets_lengths_free(&self->offl);
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* A .mtok record's token (UTF-8) in the bytes offsets_measure takes: as it is, or for a
 * byte-level vocabulary the bytes its GPT-2 characters stand for (-1 when one stands for none). */
static Py_ssize_t record_bytes(const uint8_t *s, size_t n, int byte_level, Bytes *out, const uint8_t **bytes) {
    if (!byte_level) {
        *bytes = s;
        return (Py_ssize_t)n;
    }
    if (out->cap < n + 1) {
        uint8_t *v = realloc(out->v, n + 1);
        if (!v) {
            PyErr_NoMemory();
            return -2;
        }
        out->v = v;
        out->cap = n + 1;
    }
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        i += utf8_get(s + i, n - i, &c);
        int b = gpt2_byte(c);
        if (b < 0)
            return -1;
        out->v[w++] = (uint8_t)b;
    }
    *bytes = out->v;
    return (Py_ssize_t)w;
}

/* offsets_measure over each token of vocab: a .mtok's MtokTables, a dict token -> id or a list of
 * tokens (Unigram pieces, each of its index's id). */
static int measure_vocab(const TokenMeasure *m, PyObject *vocab, int byte_level, Bytes *key) {
    if (mtok_tables_check(vocab)) {
        const MtokIndex *x = mtok_index(vocab);
        if (!x)
            return -1;
        for (size_t k = 0, pos = 0; k < x->count; k++) {
            MtokRecord r = mtok_record_next(x, &pos);
            const uint8_t *bytes;
            Py_ssize_t n = record_bytes(r.token, r.len, byte_level, key, &bytes);
            if (n == -2)
                return -1;
            if (n >= 0)
                offsets_measure(m, bytes, (size_t)n, r.id);
        }
        return 0;
    }
    int dict = PyDict_Check(vocab);
    if (!dict && !PyList_Check(vocab)) {
        PyErr_SetString(PyExc_TypeError, "token_lengths: vocab is an MtokTables, a dict or a list");
        return -1;
    }
    Py_ssize_t pos = 0, size = dict ? 0 : PyList_GET_SIZE(vocab);
    PyObject *token, *value;
    for (Py_ssize_t i = 0; dict ? PyDict_Next(vocab, &pos, &token, &value) : i < size; i++) {
        int64_t id = i;
        if (dict) {
            long long v = PyLong_AsLongLong(value);
            if (v == -1 && PyErr_Occurred())
                return -1;
            id = v;
        } else {
            token = PyList_GET_ITEM(vocab, i);
        }
        Py_ssize_t n = key_bytes(token, byte_level, key);
        if (n == -2)
            return -1;
        if (n >= 0)
            offsets_measure(m, key->v, (size_t)n, id);
    }
    return 0;
}

static const char *const LENGTH_KINDS[] = {[LENGTHS_UTF8] = "utf8", [LENGTHS_BYTE_LEVEL] = "byte_level",
                                           [LENGTHS_WORDPIECE] = "wordpiece"};

/* token_lengths(vocab, bound, kind, affix) -> (first, second, edges): set_offsets' tables of each
 * id below bound, int32 as bytes, in one pass over the vocabulary (edges None but for byte_level). */
static PyObject *token_lengths(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *vocab, *affix;
    Py_ssize_t bound;
    const char *name;
    if (!PyArg_ParseTuple(args, "OnsU:token_lengths", &vocab, &bound, &name, &affix))
        return NULL;
    int kind = -1;
    for (int k = 0; k < (int)(sizeof LENGTH_KINDS / sizeof *LENGTH_KINDS); k++)
        if (strcmp(name, LENGTH_KINDS[k]) == 0)
            kind = k;
    if (kind < 0 || bound < 0 || (size_t)bound > PY_SSIZE_T_MAX / sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "token_lengths: kind is utf8, byte_level or wordpiece, bound >= 0");
        return NULL;
    }
    int byte_level = kind == LENGTHS_BYTE_LEVEL;
    Bytes key = {0}, affix_key = {0};
    Py_ssize_t naffix = key_bytes(affix, byte_level, &affix_key);
    PyObject *first = naffix >= 0 ? PyBytes_FromStringAndSize(NULL, bound * (Py_ssize_t)sizeof(int32_t)) : NULL;
    PyObject *second = first ? PyBytes_FromStringAndSize(NULL, bound * (Py_ssize_t)sizeof(int32_t)) : NULL;
    PyObject *edges = second && byte_level ? PyBytes_FromStringAndSize(NULL, bound * (Py_ssize_t)sizeof(int32_t))
                      : second             ? Py_NewRef(Py_None)
                                           : NULL;
    PyObject *result = NULL;
    if (naffix == -1)
        PyErr_SetString(PyExc_ValueError, "token_lengths: a byte-level affix of characters no byte maps to");
    if (edges) {
        TokenMeasure m = {kind, affix_key.v, (size_t)naffix, (size_t)bound,
                          (int32_t *)(void *)PyBytes_AS_STRING(first), (int32_t *)(void *)PyBytes_AS_STRING(second),
                          edges != Py_None ? (int32_t *)(void *)PyBytes_AS_STRING(edges) : NULL};
        memset(m.first, 0, (size_t)bound * sizeof(int32_t));
        memset(m.second, 0, (size_t)bound * sizeof(int32_t));
        if (m.edges)
            memset(m.edges, 0, (size_t)bound * sizeof(int32_t));
        if (measure_vocab(&m, vocab, byte_level, &key) == 0)
            result = PyTuple_Pack(3, first, second, edges);
    }
    Py_XDECREF(first);
    Py_XDECREF(second);
    Py_XDECREF(edges);
    free(key.v);
    free(affix_key.v);
    return result;
}

/* An offset's int: the ids' table holds most (it is as large as the vocabulary). */
static PyObject *offset_int(Encoder *self, long v) {
    return (size_t)v < self->ints.n ? ints_get(self->ints, (size_t)v) : PyLong_FromLong(v);
}

static PyObject *span_new(Encoder *self, long a, long b) {
    PyObject *t = PyTuple_New(2), *start = t ? offset_int(self, a) : NULL, *end = start ? offset_int(self, b) : NULL;
    if (!end) {
        Py_XDECREF(t);
        Py_XDECREF(start);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, start);
    PyTuple_SET_ITEM(t, 1, end);
    /* a tuple of two ints is in no reference cycle: the cyclic collector need not walk it */
    PyObject_GC_UnTrack(t);
    return t;
}

/* The slot of the shared tuple (a, b), or NULL for a span beyond them. Most tokens' spans are
 * few (short, early in a text), so their tuples are made once and shared by every list returned,
 * which no caller can tell from new ones as tuples are immutable: a token then costs a
 * reference, not a tuple's allocation and free, which take longer than the encoding. The slots
 * of one width lie together: a text's tokens read them as a few streams moving forward, a line
 * serving several tokens, rather than a line of the table each. */
static PyObject **span_slot(Encoder *self, long a, long b) {
    if ((unsigned long)a >= SPAN_STARTS || (unsigned long)(b - a) >= SPAN_WIDTHS)
        return NULL;
    return &self->spans[(size_t)(b - a) * SPAN_STARTS + (size_t)a];
}

/* A list of n slots the caller fills before anything reads it: PyList_New zeroes them first,
 * a pass over as much memory as the list, which a call's offsets then write over again. */
static PyObject *list_unfilled(size_t n) {
    PyObject *list = PyList_New(0);
    if (list && list_room(list, n) < 0)
        Py_CLEAR(list);
    else if (list)
        Py_SET_SIZE(list, (Py_ssize_t)n);
    return list;
}

/* The (start, end) tuples, within nb and na (0, 0) tuples (the post-processor's special tokens).
 * Each token's shared tuple where it is made (most, once the first texts have made them), the
 * others made in a second pass over the slots left NULL. The list is left out of the cyclic
 * collector while it fills, which the young collections the new tuples' allocations set off
 * would otherwise walk again and again. */
static PyObject *offsets_list(Encoder *self, const IdBuf *offs, size_t nb, size_t na) {
    size_t n = offs->n / 2, total = nb + n + na, missing = nb + na;
    if (!self->spans && !(self->spans = calloc(SPAN_STARTS * SPAN_WIDTHS, sizeof *self->spans)))
        return PyErr_NoMemory();
    PyObject *list = list_unfilled(total);
    if (!list)
        return NULL;
    PyObject_GC_UnTrack(list);
    PyObject **items = ((PyListObject *)list)->ob_item, **shared = self->spans;
    const int32_t *v = offs->v;
    for (size_t i = 0; i < nb; i++)
        items[i] = NULL;
    for (size_t i = 0; i < na; i++)
        items[nb + n + i] = NULL;
    /* each token's shared tuple, its count written SPAN_AHEAD tokens later: the tuples lie far
     * apart, beyond the second-level cache once many texts have made them, and their misses
     * overlap that way (4-9% of a 2 KB call with offsets, interleaved A/B in one process) */
    PyObject **at = items + nb;
    size_t ahead = n < SPAN_AHEAD ? n : SPAN_AHEAD;
    for (size_t i = 0; i < n; i++) {
        /* span_slot without its pointer: spans are not negative, a start past SPAN_STARTS fails
         * the one test */
        uint32_t a = (uint32_t)v[2 * i], width = (uint32_t)v[2 * i + 1] - a;
        PyObject *t = a < SPAN_STARTS && width < SPAN_WIDTHS ? shared[width * SPAN_STARTS + a] : NULL;
        at[i] = t;
        if (t)
            __builtin_prefetch(t, 1);
        if (i >= ahead) {
            if (at[i - ahead])
                Py_INCREF(at[i - ahead]);
            else
                missing++;
        }
    }
    for (size_t i = n - ahead; i < n; i++) {
        if (at[i])
            Py_INCREF(at[i]);
        else
            missing++;
    }
    for (size_t i = 0; missing && i < total; i++) {
        if (items[i])
            continue;
        missing--;
        int token = i >= nb && i < nb + n; /* else a special token's (0, 0) */
        long a = token ? v[2 * (i - nb)] : 0, b = token ? v[2 * (i - nb) + 1] : 0;
        PyObject **slot = span_slot(self, a, b), *t = slot && *slot ? *slot : span_new(self, a, b);
        if (!t) {
            /* the slots not reached yet are NULL or hold a reference of their own */
            Py_DECREF(list);
            return NULL;
        }
        if (slot && !*slot)
            *slot = Py_NewRef(t);
        else if (slot)
            Py_INCREF(t);
        items[i] = t;
    }
    PyObject_GC_Track(list);
    return list;
}

static int read_ids(PyObject *seq, IdBuf *ids);

static PyObject *Encoder_encode_offsets(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    long trim;
    if ((nargs != 3 && nargs != 5) || !PyUnicode_Check(args[0]) ||
        ((trim = PyLong_AsLong(args[2])) == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "encode_offsets(text: str, normalizer: callable | None, trim: int[, before, after])");
        return NULL;
    }
    if (trim != OFF_NO_TRIM && trim != OFF_TRIM && trim != OFF_TRIM_PREFIX_SPACE) {
        PyErr_SetString(PyExc_ValueError, "encode_offsets: trim is -1 (none), 0 or 1 (add_prefix_space)");
        return NULL;
    }
    if (!self->ints.v || !self->offl.first) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder has no token lengths (set_offsets)");
        return NULL;
    }
    PyObject *text = args[0];
    size_t n;
    if (encodable_length(text, &n) < 0)
        return NULL;
    const NormOp *ops = NULL;
    size_t nops = 0;
    if (n > INT32_MAX || !native_ops(args[1], &ops, &nops))
        Py_RETURN_NONE;
    IdBuf before = {0}, after = {0};
    if (nargs == 5 && (read_ids(args[3], &before) < 0 || read_ids(args[4], &after) < 0)) {
        free(before.v);
        free(after.v);
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* the ids and spans into the Work's buffers, as encode_text: the lists are made before it
     * is given back */
    Work own, *w = work_take(&own);
    IdBuf *ids = &w->out, *offs = &w->offs;
    ids->n = offs->n = 0;
    size_t expected = ids_expected(n);
    int err = (ids->cap < expected && ids_grow(ids, expected) < 0) ||
                      (offs->cap < 2 * expected && ids_grow(offs, 2 * expected) < 0)
                  ? -1
                  : 0;
    if (!err) {
        PyThreadState *released = gil_release(n);
        const uint32_t *cps = text_cps(w, kind, data, 0, n);
        err = !cps ? -1 : offsets_text_core(self, ops, nops, cps, n, (int)trim, w, ids, offs);
        gil_take(released);
    }
    PyObject *result = NULL;
    if (err == -1) {
        PyErr_NoMemory();
    } else if (err) {
        result = Py_NewRef(Py_None);
    } else {
        /* the tuples first: the collections their allocations set off then find the ids' list
         * not made yet, instead of walking it each time */
        PyObject *spans = offsets_list(self, offs, before.n, after.n),
                 *list = spans ? ids_within(self->ints, &before, ids, &after) : NULL;
        result = list ? PyTuple_Pack(2, list, spans) : NULL;
        Py_XDECREF(list);
        Py_XDECREF(spans);
    }
    work_give(w, &own);
    free(before.v);
    free(after.v);
    return result;
}

static int read_ids(PyObject *seq, IdBuf *ids) {
    PyObject *tuple = PySequence_Tuple(seq);
    if (!tuple)
        return -1;
    ids->n = 0;
    int err = 0;
    for (Py_ssize_t i = 0; !err && i < PyTuple_GET_SIZE(tuple); i++) {
        int32_t id;
        if ((err = read_id(PyTuple_GET_ITEM(tuple, i), &id)) == 0 && (err = ids_push(ids, id)) < 0)
            PyErr_NoMemory();
    }
    Py_DECREF(tuple);
    return err;
}

static PyObject *Encoder_set_first(Encoder *self, PyObject *first) {
    if (first != Py_None && !PyCallable_Check(first)) {
        PyErr_SetString(PyExc_TypeError, "set_first(normalize_first: callable | None)");
        return NULL;
    }
    Py_XSETREF(self->first, first == Py_None ? NULL : Py_NewRef(first));
    Py_RETURN_NONE;
}

static PyObject *Encoder_set_post(Encoder *self, PyObject *args) {
    PyObject *prefix, *suffix;
    if (!PyArg_ParseTuple(args, "OO:set_post", &prefix, &suffix) || read_ids(prefix, &self->prefix) < 0 ||
        read_ids(suffix, &self->suffix) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- encode_batch: texts encoded by several threads, lists built by the calling one ----- */

enum { CHUNK_PENDING, CHUNK_DONE, CHUNK_NOMEM };

/* Contiguous texts one thread encodes; the caller builds their lists once state is DONE. */
typedef struct {
    Py_ssize_t first, last;
    Py_ssize_t bad;   /* the first text encode() would refuse (not a str, lone surrogate, null, not UTF-8), or -1 */
    size_t bad_at;    /* where its surrogate (its first byte that is not UTF-8) is */
    IdBuf out;        /* the ids of the chunk's texts, one after the other */
    atomic_int state;
} Chunk;

/* One text of an Arrow string array: its UTF-8 bytes, or n < 0 for a null. */
typedef struct {
    const uint8_t *p;
    int64_t n;
} Utf8Text;

typedef struct {
    Encoder *self;
    const NormOp *ops;
    size_t nops;
    int native;              /* the normalizer runs without the GIL; else every text is redone */
    PyObject **items;        /* the texts as str, or NULL and they are utf8's */
    const Utf8Text *utf8;
    Py_ssize_t *ends;        /* per text: where its ids end in its chunk's out, -2 to redo with the GIL */
    Chunk *chunks;
    size_t nchunks;
    atomic_size_t next;      /* the next chunk to claim */
    atomic_int stop;         /* the caller has failed: claim nothing more */
    atomic_int left;         /* helper threads still running, plus one for the caller */
    PyThread_type_lock finished; /* held by the caller until the last helper ends */
} Batch;

/* Claims the next chunk and encodes it, without the GIL; 0 when none is left. */
static int batch_step(Batch *b, Work *w) {
    size_t c = atomic_fetch_add(&b->next, 1);
    if (c >= b->nchunks || atomic_load(&b->stop))
        return 0;
    Chunk *ch = &b->chunks[c];
    int state = CHUNK_DONE;
    /* the ids go to the thread's own stack until the chunk is done: a chunk's neighbour in the
     * array, which another thread is filling, may share its cache line */
    IdBuf out = {0};
    for (Py_ssize_t i = ch->first; i < ch->last; i++) {
        size_t n;
        if (b->utf8) {
            /* read (and checked) whatever the normalizer: a text to redo is made from it */
            const Utf8Text *u = &b->utf8[i];
            int r = u->n < 0 ? 1 : read_utf8(w, u->p, (size_t)u->n, &n, &ch->bad_at);
            if (r) {
                if (r < 0)
                    state = CHUNK_NOMEM;
                else
                    ch->bad = i;
                break;
            }
        } else {
            PyObject *t = b->items[i];
            if (!PyUnicode_Check(t)) {
                ch->bad = i;
                break;
            }
            int kind = PyUnicode_KIND(t);
            const void *data = PyUnicode_DATA(t);
            size_t at;
            n = (size_t)PyUnicode_GET_LENGTH(t);
            if ((at = find_surrogate(kind, data, n)) < n) {
                ch->bad = i;
                ch->bad_at = at;
                break;
            }
            if (b->native && read_text(w, kind, data, n) < 0) {
                state = CHUNK_NOMEM;
                break;
            }
        }
        b->ends[i] = -2;
        if (!b->native)
            continue;
        size_t mark = out.n;
        int r = encode_text_core(b->self, b->ops, b->nops, w->text, n, w, &out);
        if (r == -2) {
            out.n = mark;
        } else if (r < 0) {
            state = CHUNK_NOMEM;
            break;
        } else {
            b->ends[i] = (Py_ssize_t)out.n;
        }
    }
    ch->out = out;
    atomic_store_explicit(&ch->state, state, memory_order_release);
    return 1;
}

static void batch_helper(void *arg) {
    Batch *b = arg;
    Work own, *w = work_take(&own);
    while (batch_step(b, w))
        ;
    work_give(w, &own);
    if (atomic_fetch_sub(&b->left, 1) == 1)
        PyThread_release_lock(b->finished);
}

/* The error for text k, which batch_step refused. */
static void batch_refused(const Batch *b, const Chunk *ch, Py_ssize_t k) {
    if (!b->utf8) {
        PyObject *t = b->items[k];
        if (!PyUnicode_Check(t))
            PyErr_Format(PyExc_TypeError, "encode() takes a str, got %s", Py_TYPE(t)->tp_name);
        else
            raise_surrogate(t, ch->bad_at);
        return;
    }
    if (b->utf8[k].n < 0) {
        PyErr_Format(PyExc_TypeError, "encode_arrow(): row %zd is null (encode() takes a str)", k);
        return;
    }
    PyObject *errors = PyImport_ImportModule("pymtok.errors"), *cls = NULL;
    if (errors && (cls = PyObject_GetAttrString(errors, "TextError")))
        PyErr_Format(cls, "encode_arrow(): row %zd is not UTF-8 (byte %zu)", k, ch->bad_at);
    Py_XDECREF(cls);
    Py_XDECREF(errors);
}

/* text k's ids into out with the GIL (batch_step left it, ends[k] == -2). */
static int batch_redo(const Batch *b, Py_ssize_t k, PyObject *normalizer, Work *w, IdBuf *out) {
    out->n = 0;
    if (!b->utf8)
        return encode_text_into(b->self, b->items[k], normalizer, w, out);
    PyObject *t = PyUnicode_DecodeUTF8((const char *)b->utf8[k].p, (Py_ssize_t)b->utf8[k].n, NULL);
    int err = t ? encode_text_into(b->self, t, normalizer, w, out) : -1;
    Py_XDECREF(t);
    return err;
}

/* The lists of a DONE chunk's texts into result; -1 with the Python error set (encode()'s for
 * its first refused text). */
static int batch_lists(Batch *b, Chunk *ch, PyObject *normalizer, int special, PyObject *result, Work *w) {
    if (atomic_load_explicit(&ch->state, memory_order_acquire) == CHUNK_NOMEM) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t start = 0;
    IdBuf redo = {0};
    int err = 0;
    for (Py_ssize_t k = ch->first; !err && k < ch->last; k++) {
        PyObject *list = NULL;
        if (k == ch->bad) {
            batch_refused(b, ch, k);
        } else if (b->ends[k] >= 0) {
            IdBuf slice = {ch->out.v + start, (size_t)(b->ends[k] - start), 0};
            list = id_list(b->self, &slice, special);
            start = b->ends[k];
        } else {
            list = batch_redo(b, k, normalizer, w, &redo) < 0 ? NULL : id_list(b->self, &redo, special);
        }
        if (list)
            PyList_SET_ITEM(result, k, list);
        else
            err = -1;
    }
    free(redo.v);
    free(ch->out.v);
    ch->out.v = NULL;
    return err;
}

/* encode_batch's flat modes: the ids of all texts one after the other with per text where its ids
 * end (BATCH_FLAT, Arrow's list layout), or only how many ids each text has (BATCH_COUNT). */
enum { BATCH_LISTS, BATCH_FLAT, BATCH_COUNT };

typedef struct {
    int mode;
    IdBuf ids;
    int64_t *ends; /* BATCH_FLAT: count + 1 offsets from 0; BATCH_COUNT: count lengths */
} Flat;

static int flat_put(Flat *f, Encoder *self, Py_ssize_t k, const IdBuf *ids, int special) {
    const IdBuf *pre = special ? &self->prefix : &no_ids, *suf = special ? &self->suffix : &no_ids;
    if (f->mode == BATCH_COUNT) {
        f->ends[k] = (int64_t)(pre->n + ids->n + suf->n);
        return 0;
    }
    if (ids_extend(&f->ids, pre->v, pre->n) < 0 || ids_extend(&f->ids, ids->v, ids->n) < 0 ||
        ids_extend(&f->ids, suf->v, suf->n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    f->ends[k + 1] = (int64_t)f->ids.n;
    return 0;
}

/* batch_lists for the flat modes: a DONE chunk's ids appended to f, in text order. */
static int batch_flat(Batch *b, Chunk *ch, PyObject *normalizer, int special, Flat *f, Work *w) {
    if (atomic_load_explicit(&ch->state, memory_order_acquire) == CHUNK_NOMEM) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t start = 0;
    IdBuf redo = {0};
    int err = 0;
    for (Py_ssize_t k = ch->first; !err && k < ch->last; k++) {
        if (k == ch->bad) {
            batch_refused(b, ch, k);
            err = -1;
        } else if (b->ends[k] >= 0) {
            IdBuf slice = {ch->out.v + start, (size_t)(b->ends[k] - start), 0};
            err = flat_put(f, b->self, k, &slice, special);
            start = b->ends[k];
        } else {
            err = batch_redo(b, k, normalizer, w, &redo) < 0 ? -1 : flat_put(f, b->self, k, &redo, special);
        }
    }
    free(redo.v);
    free(ch->out.v);
    ch->out.v = NULL;
    return err;
}

/* The flat result as Python bytes: (ids as uint32, offsets as int64) or the int64 counts. */
static PyObject *flat_result(Flat *f, Py_ssize_t count) {
    if (f->mode == BATCH_COUNT)
        return PyBytes_FromStringAndSize((const char *)f->ends, (Py_ssize_t)((size_t)count * sizeof *f->ends));
    PyObject *ids = PyBytes_FromStringAndSize((const char *)f->ids.v, (Py_ssize_t)(f->ids.n * sizeof *f->ids.v));
    PyObject *ends = PyBytes_FromStringAndSize((const char *)f->ends, (Py_ssize_t)((size_t)(count + 1) * sizeof *f->ends));
    PyObject *pair = ids && ends ? PyTuple_Pack(2, ids, ends) : NULL;
    Py_XDECREF(ids);
    Py_XDECREF(ends);
    return pair;
}

/* Contiguous chunks of about BATCH_CHUNK_CHARS code points (UTF-8 bytes), claimed by threads in turn: texts
 * sorted by kind (a language, code) cost alike, and any thread done early takes the next. */
static int batch_chunks(Batch *b, Py_ssize_t count) {
    if (!(b->chunks = calloc((size_t)(count ? count : 1), sizeof *b->chunks)))
        return -1;
    size_t chars = BATCH_CHUNK_CHARS;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (chars >= BATCH_CHUNK_CHARS) {
            b->chunks[b->nchunks++] = (Chunk){.first = i, .bad = -1};
            chars = 0;
        }
        b->chunks[b->nchunks - 1].last = i + 1;
        if (b->utf8)
            chars += b->utf8[i].n > 0 ? (size_t)b->utf8[i].n : 0;
        else if (PyUnicode_Check(b->items[i]))
            chars += (size_t)PyUnicode_GET_LENGTH(b->items[i]);
    }
    return 0;
}

/* The texts of b (b->items or b->utf8, count of them) encoded as encode_text does each:
 * num_threads - 1 helper threads and the caller encode chunks of texts without the GIL; between
 * its chunks the caller builds the lists of those done so far (or appends their ids to the flat
 * result, mode BATCH_FLAT / BATCH_COUNT: see flat_result). */
static PyObject *batch_run(Batch *b, Py_ssize_t count, PyObject *normalizer, int special, Py_ssize_t threads,
                           long mode) {
    b->native = native_ops(normalizer, &b->ops, &b->nops);
    atomic_init(&b->left, 1);
    b->ends = PyMem_Malloc((size_t)(count ? count : 1) * sizeof *b->ends);
    Flat flat = {.mode = (int)mode};
    PyObject *result = mode == BATCH_LISTS ? PyList_New(count) : Py_NewRef(Py_None);
    if (result && mode != BATCH_LISTS && (flat.ends = calloc((size_t)count + 1, sizeof *flat.ends)) == NULL) {
        PyErr_NoMemory();
        Py_CLEAR(result);
    }
    if (!result || !b->ends || batch_chunks(b, count) < 0) {
        if (result)
            PyErr_NoMemory();
        Py_CLEAR(result);
        goto out;
    }
    /* with a Python normalizer every text is redone with the GIL: helpers would only wait */
    if (b->native && threads > 1 && b->nchunks > 1 && (b->finished = PyThread_allocate_lock())) {
        PyThread_acquire_lock(b->finished, WAIT_LOCK);
        for (Py_ssize_t k = 1; k < threads && (size_t)k < b->nchunks; k++) {
            atomic_fetch_add(&b->left, 1);
            if (PyThread_start_new_thread(batch_helper, b) == PYTHREAD_INVALID_THREAD_ID) {
                atomic_fetch_sub(&b->left, 1);
                break; /* fewer threads: the work is only slower */
            }
        }
    }
    Work own, *w = work_take(&own);
    size_t built = 0;
    int more = 1, err = 0;
    while (!err && built < b->nchunks) {
        if (more) {
            Py_BEGIN_ALLOW_THREADS
            more = batch_step(b, w);
            Py_END_ALLOW_THREADS
        } else if (atomic_load_explicit(&b->chunks[built].state, memory_order_acquire) == CHUNK_PENDING) {
            break; /* the rest is the helpers' */
        }
        for (; !err && built < b->nchunks &&
               atomic_load_explicit(&b->chunks[built].state, memory_order_acquire) != CHUNK_PENDING;
             built++)
            err = mode == BATCH_LISTS ? batch_lists(b, &b->chunks[built], normalizer, special, result, w)
                                      : batch_flat(b, &b->chunks[built], normalizer, special, &flat, w);
    }
    if (err)
        atomic_store(&b->stop, 1);
    if (atomic_fetch_sub(&b->left, 1) != 1) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(b->finished, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    if (b->finished) {
        PyThread_release_lock(b->finished);
        PyThread_free_lock(b->finished);
    }
    for (; !err && built < b->nchunks; built++)
        err = mode == BATCH_LISTS ? batch_lists(b, &b->chunks[built], normalizer, special, result, w)
                                  : batch_flat(b, &b->chunks[built], normalizer, special, &flat, w);
    if (err)
        Py_CLEAR(result);
    else if (mode != BATCH_LISTS)
        Py_SETREF(result, flat_result(&flat, count));
    work_give(w, &own);
    for (size_t c = built; c < b->nchunks; c++)
        free(b->chunks[c].out.v);
out:
    free(flat.ids.v);
    free(flat.ends);
    free(b->chunks);
    PyMem_Free(b->ends);
    return result;
}

/* encode_batch(texts, normalizer, add_special_tokens, num_threads[, mode]) -> list[list[int]]:
 * encode_text of each text (batch_run). */
static PyObject *Encoder_encode_batch(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t threads;
    long mode = BATCH_LISTS;
    int special;
    if ((nargs != 4 && nargs != 5) || (special = PyObject_IsTrue(args[2])) < 0 ||
        ((threads = PyLong_AsSsize_t(args[3])) == -1 && PyErr_Occurred()) ||
        (nargs == 5 && (((mode = PyLong_AsLong(args[4])) == -1 && PyErr_Occurred()) || mode < BATCH_LISTS ||
                        mode > BATCH_COUNT))) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "encode_batch(texts: list[str], normalizer: callable | None, "
                                         "add_special_tokens: bool, num_threads: int[, mode: 0 | 1 | 2])");
        return NULL;
    }
    if (!self->ints.v) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is not initialised");
        return NULL;
    }
    /* a tuple: the texts stay alive while the GIL is released, whatever happens to the list */
    PyObject *seq = PySequence_Tuple(args[0]);
    if (!seq)
        return NULL;
    Batch b = {.self = self, .items = &PyTuple_GET_ITEM(seq, 0)};
    PyObject *result = batch_run(&b, PyTuple_GET_SIZE(seq), args[1], special, threads, mode);
    Py_DECREF(seq);
    return result;
}

/* ---- encode_arrow: Arrow string arrays read from their buffers ---------------------------- */

/* An Arrow offset (int32 or int64, wide: 8 bytes) at index i, read unaligned. */
static int64_t arrow_offset(const uint8_t *offsets, int wide, size_t i) {
    if (wide) {
        int64_t v;
        memcpy(&v, offsets + i * 8, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, offsets + i * 4, 4);
    return v;
}

/* A buffer of an Arrow array (or None: no buffer) into *view; -1 with the error set. */
static int arrow_buffer(PyObject *o, Py_buffer *view) {
    if (o == Py_None) {
        *view = (Py_buffer){.buf = NULL, .len = 0};
        return 0;
    }
    return PyObject_GetBuffer(o, view, PyBUF_SIMPLE);
}

/* The texts of one Arrow string array, (validity, offsets, data, length, offset, wide), into
 * texts[0, length): every offset checked within the buffers, so that a hostile array reads
 * nothing outside them. -1 with the error set. */
static int arrow_texts(PyObject *chunk, Py_ssize_t first, Utf8Text *texts, Py_ssize_t *length, Py_buffer *views) {
    Py_ssize_t offset;
    int wide;
    if (!PyTuple_Check(chunk) || PyTuple_GET_SIZE(chunk) != 6 ||
        ((*length = PyLong_AsSsize_t(PyTuple_GET_ITEM(chunk, 3))) == -1 && PyErr_Occurred()) ||
        ((offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(chunk, 4))) == -1 && PyErr_Occurred()) ||
        (wide = PyObject_IsTrue(PyTuple_GET_ITEM(chunk, 5))) < 0 || *length < 0 || offset < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "encode_arrow(): a chunk is (validity, offsets, data, length: int >= 0, "
                                         "offset: int >= 0, wide: bool)");
        return -1;
    }
    if (texts == NULL) /* counting only */
        return 0;
    for (int k = 0; k < 3; k++)
        if (arrow_buffer(PyTuple_GET_ITEM(chunk, k), &views[k]) < 0)
            return -1; /* the caller releases the views taken */
    const uint8_t *valid = views[0].buf, *offs = views[1].buf, *data = views[2].buf;
    size_t n = (size_t)*length, at = (size_t)offset, width = wide ? 8 : 4, nd = (size_t)views[2].len;
    const char *fault = NULL;
    if (n && (size_t)views[1].len / width < at + n + 1)
        fault = "its offsets buffer is too short";
    else if (n && valid && (size_t)views[0].len < (at + n + 7) / 8)
        fault = "its validity bitmap is too short";
    for (size_t i = 0; !fault && i < n; i++) {
        int64_t a = arrow_offset(offs, wide, at + i), z = arrow_offset(offs, wide, at + i + 1);
        if (a < 0 || z < a || (uint64_t)z > nd) {
            PyErr_Format(PyExc_ValueError,
                         "encode_arrow(): row %zd's offsets %lld..%lld are not within the data buffer's %zu bytes",
                         first + (Py_ssize_t)i, (long long)a, (long long)z, nd);
            return -1;
        }
        int null = valid && !(valid[(at + i) >> 3] >> ((at + i) & 7) & 1);
        texts[i] = (Utf8Text){data + a, null ? -1 : z - a};
    }
    if (fault) {
        PyErr_Format(PyExc_ValueError, "encode_arrow(): the Arrow array of %zd rows at offset %zd is malformed: %s",
                     *length, offset, fault);
        return -1;
    }
    return 0;
}

/* encode_arrow(chunks, normalizer, add_special_tokens, num_threads, mode) -> encode_batch's flat
 * result (mode BATCH_FLAT or BATCH_COUNT) for the texts of Arrow string arrays, each chunk
 * (validity bitmap or None, offsets, data or None, length, offset, wide): buffers read through
 * the buffer protocol, each text's UTF-8 decoded as it is encoded, no str made unless a text
 * needs the normalizer's pure path. */
static PyObject *Encoder_encode_arrow(Encoder *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t threads;
    long mode;
    int special;
    if (nargs != 5 || !PyTuple_Check(args[0]) || (special = PyObject_IsTrue(args[2])) < 0 ||
        ((threads = PyLong_AsSsize_t(args[3])) == -1 && PyErr_Occurred()) ||
        ((mode = PyLong_AsLong(args[4])) == -1 && PyErr_Occurred()) || mode < BATCH_FLAT || mode > BATCH_COUNT) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "encode_arrow(chunks: tuple, normalizer: callable | None, "
                                         "add_special_tokens: bool, num_threads: int, mode: 1 | 2)");
        return NULL;
    }
    if (!self->ints.v) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is not initialised");
        return NULL;
    }
    Py_ssize_t nchunks = PyTuple_GET_SIZE(args[0]), count = 0, length;
    for (Py_ssize_t c = 0; c < nchunks; c++) {
        if (arrow_texts(PyTuple_GET_ITEM(args[0], c), 0, NULL, &length, NULL) < 0)
            return NULL;
        if (length > PY_SSIZE_T_MAX / (Py_ssize_t)(2 * sizeof(Utf8Text)) - count)
            return PyErr_NoMemory();
        count += length;
    }
    Utf8Text *texts = PyMem_Malloc((size_t)(count ? count : 1) * sizeof *texts);
    Py_buffer *views = PyMem_Calloc((size_t)(nchunks ? nchunks : 1) * 3, sizeof *views);
    PyObject *result = NULL;
    Py_ssize_t read = 0, c = 0;
    if (!texts || !views) {
        PyErr_NoMemory();
        goto out;
    }
    for (; c < nchunks; c++, read += length)
        if (arrow_texts(PyTuple_GET_ITEM(args[0], c), read, texts + read, &length, views + 3 * c) < 0)
            goto out;
    /* the views keep the buffers alive (and unmoved) while the GIL is released */
    Batch b = {.self = self, .utf8 = texts};
    result = batch_run(&b, count, args[1], special, threads, mode);
out:
    for (Py_ssize_t k = 0; views && k < 3 * nchunks; k++)
        if (views[k].obj)
            PyBuffer_Release(&views[k]);
    PyMem_Free(views);
    PyMem_Free(texts);
    return result;
}

/* cache_stats() -> (entries, resets): the piece cache's entries now and how often it was emptied */
static PyObject *Encoder_cache_stats(Encoder *self, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(nn)", (Py_ssize_t)atomic_load(&self->cache.count), (Py_ssize_t)atomic_load(&self->cache.resets));
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))Encoder_encode, METH_FASTCALL,
     "encode(normalized_segment, offset) -> list[int]: the ids of one segment."},
    {"set_added", (PyCFunction)Encoder_set_added, METH_VARARGS,
     "set_added(raw, normalized): the added tokens encode_text matches, as (content, id, flags) lists."},
    {"set_post", (PyCFunction)Encoder_set_post, METH_VARARGS,
     "set_post(prefix, suffix): the ids add_special_tokens puts around a text's (the post-processor's)."},
    {"set_first", (PyCFunction)Encoder_set_first, METH_O,
     "set_first(normalize_first): normalizers.normalize_first for encode_text's normalizer, or None: the\n"
     "first segment normalized with its alignment, for Metaspace's \"first\"."},
    {"encode_text", (PyCFunction)(void (*)(void))Encoder_encode_text, METH_FASTCALL,
     "encode_text(normalizer, text, add_special_tokens) -> list[int]: added tokens, normalization and\n"
     "segments in one call; ValueError for a lone surrogate, as Tokenizer.encode."},
    {"encode_u32", (PyCFunction)(void (*)(void))Encoder_encode_u32, METH_FASTCALL,
     "encode_u32(normalizer, text, add_special_tokens) -> bytearray: encode_text's ids as 4-byte unsigned\n"
     "ints in native byte order (Tokenizer.encode_to_numpy), no int object made."},
    {"encode_arrow", (PyCFunction)(void (*)(void))Encoder_encode_arrow, METH_FASTCALL,
     "encode_arrow(chunks, normalizer, add_special_tokens, num_threads, mode) -> encode_batch's flat result\n"
     "for Arrow string arrays, each chunk (validity or None, offsets, data or None, length, offset, wide)"},
    {"encode_batch", (PyCFunction)(void (*)(void))Encoder_encode_batch, METH_FASTCALL,
     "encode_batch(texts, normalizer, add_special_tokens, num_threads[, mode]) -> list[list[int]]: encode_text\n"
     "of each, on num_threads threads without the GIL. mode 1: (uint32 ids, int64 offsets) as bytes;\n"
     "mode 2: the int64 id counts as bytes."},
    {"set_offsets", (PyCFunction)Encoder_set_offsets, METH_VARARGS,
     "set_offsets(lengths, cont, unk_id[, chars[, edges]]): each id's length in bytes (int32 as bytes, -1 where not\n"
     "known), WordPiece's for tokens after a word's first (else None), its unknown token and BPE's or\n"
     "Unigram's lengths in characters (-1 where a token is not whole characters), for encode_offsets; a\n"
     "byte-level BPE's token_lengths edges, which its trimmed offsets read."},
    {"encode_offsets", (PyCFunction)(void (*)(void))Encoder_encode_offsets, METH_FASTCALL,
     "encode_offsets(text, normalizer, trim[, before, after]) -> (ids, offsets) | None: encode_text(text,\n"
     "normalizer, False) with each token's (start, end) characters as HF reports them, trimmed as ByteLevel's\n"
     "process_offsets when trim >= 0 (1: with add_prefix_space); None where only the pure path knows them.\n"
     "With before and after (ids), the ids come within them and the offsets within as many (0, 0)."},
    {"cache_stats", (PyCFunction)Encoder_cache_stats, METH_NOARGS,
     "cache_stats() -> (entries, resets): the piece cache's entries and how often it was emptied when full."},
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

/* ---- FastEncode ------------------------------------------------------------------------- */

/* Tokenizer.encode as the class's attribute, a method descriptor: the common call, encode(text)
 * or encode(text, add_special_tokens=flag), goes straight to the tokenizer's encode_text without
 * a Python frame (the frame and its keyword parsing cost more than encoding "Hello"); so does
 * encode_to_numpy's, to encode_u32 and numpy.frombuffer (its frame, and looking up numpy and
 * the tokenizer's attributes, cost as much as encoding a sentence). Any other
 * call, a tokenizer without "_encode_fast" = (Encoder, normalizer) in its __dict__, and every call
 * while its meta.split_special_tokens is set go to the Python method. It lives on the class, not
 * as a callable bound to each tokenizer in its __dict__: a tokenizer then holds no reference to
 * itself and is freed when it is dropped, not at the next full garbage collection (a process
 * loading a tokenizer per task grew by the tokenizers it had dropped). */
enum { FAST_ENCODE, FAST_NUMPY, FAST_CALL };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;  /* the Python method */
    int mode;        /* FAST_NUMPY: encode_to_numpy's uint32 array; FAST_CALL: __call__'s BatchEncoding */
    PyObject *batch; /* FAST_CALL: the BatchEncoding class */
} FastEncode;

/* The numpy module encode_to_numpy last found imported, its frombuffer and dtype(uint32) */
static PyObject *np_module, *np_frombuffer, *np_uint32;

/* 1 when numpy is imported and np_frombuffer and np_uint32 are its, 0 when it is not (the Python
 * method imports it, or says it is not installed), -1 on an error. sys.modules is read on every
 * call, as the method's import would: numpy stood in for there is the stand-in's. */
static int numpy_found(void) {
    static PyObject *name;
    if (!name && !(name = PyUnicode_InternFromString("numpy")))
        return -1;
    PyObject *np = PyImport_GetModule(name);
    if (!np || np == Py_None || np == np_module) {
        int found = np && np != Py_None;
        Py_XDECREF(np);
        return found ? 1 : PyErr_Occurred() ? -1 : 0;
    }
    PyObject *frombuffer = PyObject_GetAttrString(np, "frombuffer");
    PyObject *u32 = frombuffer ? PyObject_CallMethod(np, "dtype", "s", "uint32") : NULL;
    if (!u32) {
        Py_XDECREF(frombuffer);
        Py_DECREF(np);
        return -1;
    }
    Py_XSETREF(np_frombuffer, frombuffer);
    Py_XSETREF(np_uint32, u32);
    Py_XSETREF(np_module, np);
    return 1;
}

static PyObject *str_add_special_tokens, *str_split_special_tokens, *str_meta, *str_encode_fast;

/* 1 when the tokenizer's split_special_tokens is off and *fast holds its (Encoder, normalizer)
 * (a new reference), 0 when the Python method must answer, -1 on an error. */
static int fast_state(PyObject *tok, PyObject **fast) {
    PyObject **where = _PyObject_GetDictPtr(tok), *dict = where ? *where : NULL;
    if (!dict)
        return 0;
    PyObject *state = PyDict_GetItemWithError(dict, str_encode_fast);
    PyObject *meta = state ? PyDict_GetItemWithError(dict, str_meta) : NULL;
    Py_XINCREF(state);
    Py_XINCREF(meta);
    int ok = 0;
    if (meta && PyTuple_CheckExact(state) && PyTuple_GET_SIZE(state) == 2 &&
        Py_IS_TYPE(PyTuple_GET_ITEM(state, 0), &EncoderType)) {
        PyObject *split = PyObject_GetAttr(meta, str_split_special_tokens);
        ok = split ? split == Py_False : -1;
        Py_XDECREF(split);
    } else if (PyErr_Occurred()) {
        ok = -1;
    }
    Py_XDECREF(meta);
    if (ok == 1)
        *fast = state;
    else
        Py_XDECREF(state);
    return ok;
}

/* The names plain_call reads and writes: encoding._plain_call's, interned at import */
enum {
    N_RETURN_OFFSETS, N_CALL_MEMO, N_POST_PROCESSOR, N_CALL_SETTINGS, N_SPECIAL_TOKENS, N_BACKEND_UNMODELED,
    N_BACKEND_ADDED, N_BACKEND_DECODER, N_PLAIN, /* and the three after: encoding._PLAIN_KEYS */
    N_GET_ENCODINGS = N_PLAIN + 4, N_ENCODINGS, N_N_SEQUENCES, N_TOK, N_TEXT, N_POST, N_ADD, N_INPUT_IDS,
    N_TOKEN_TYPE_IDS, N_ATTENTION_MASK, N_OFFSET_MAPPING, N_DUNDER_CALL, N_NAMES
};
static const char *const call_name_text[N_NAMES] = {
    "return_offsets_mapping", "_call_memo", "post_processor", "call_settings", "special_tokens",
    "backend_unmodeled", "backend_added_tokens", "backend_decoder", "plain", "plain+offsets", "plain+special",
    "plain+special+offsets", "_get_encodings", "_encodings", "_n_sequences", "_tok", "_text", "_post", "_add",
    "input_ids", "token_type_ids", "attention_mask", "offset_mapping", "__call__",
};
static PyObject *call_name[N_NAMES];

/* A new reference to dict[name] (NULL, without an error, where it has none) */
static PyObject *dict_ref(PyObject *dict, PyObject *name) {
    PyObject *v = PyDict_GetItemWithError(dict, name);
    return Py_XNewRef(v);
}

/* 1 when meta's backend is the tokenizer itself (Tokenizer._backend's first answer), 0 when not,
 * -1 on an error */
static int own_backend(PyObject *meta) {
    PyObject *unmodeled = PyObject_GetAttr(meta, call_name[N_BACKEND_UNMODELED]);
    PyObject *added = unmodeled ? PyObject_GetAttr(meta, call_name[N_BACKEND_ADDED]) : NULL;
    PyObject *decoder = added ? PyObject_GetAttr(meta, call_name[N_BACKEND_DECODER]) : NULL;
    int some = decoder ? PyObject_IsTrue(added) : -1;
    int own = some < 0 ? -1 : unmodeled == Py_None && !some && decoder == Py_None;
    Py_XDECREF(unmodeled);
    Py_XDECREF(added);
    Py_XDECREF(decoder);
    return own;
}

/* The plan encoding._plain_call keeps in tok._call_memo for this call, where it still holds for
 * the tokenizer's post-processor, call settings and special tokens (a new reference), else NULL;
 * -1 on an error */
static int plain_plan(PyObject *dict, PyObject *meta, int add, int offsets, PyObject **plan) {
    *plan = NULL;
    PyObject *memo = dict_ref(dict, call_name[N_CALL_MEMO]), *known = NULL, *post = NULL, *settings = NULL,
             *specials = NULL;
    int err = -1;
    if (!memo && PyErr_Occurred())
        return -1;
    if (memo && PyDict_CheckExact(memo)) {
        known = dict_ref(memo, call_name[N_PLAIN + 2 * add + offsets]);
        if (!known && PyErr_Occurred())
            goto done;
    }
    if (!known || !PyTuple_CheckExact(known) || PyTuple_GET_SIZE(known) != 4) {
        err = 0;
        goto done;
    }
    post = dict_ref(dict, call_name[N_POST_PROCESSOR]);
    if (!post) {
        err = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (PyTuple_GET_ITEM(known, 0) != post ||
        !(settings = PyObject_GetAttr(meta, call_name[N_CALL_SETTINGS])) ||
        PyObject_RichCompareBool(PyTuple_GET_ITEM(known, 1), settings, Py_EQ) != 1 ||
        !(specials = PyObject_GetAttr(meta, call_name[N_SPECIAL_TOKENS])) ||
        PyObject_RichCompareBool(PyTuple_GET_ITEM(known, 2), specials, Py_EQ) != 1) {
        err = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    *plan = Py_NewRef(PyTuple_GET_ITEM(known, 3));
    err = 0;
done:
    Py_XDECREF(memo);
    Py_XDECREF(known);
    Py_XDECREF(post);
    Py_XDECREF(settings);
    Py_XDECREF(specials);
    return err;
}

/* A list of n references to v */
static PyObject *list_of(PyObject *v, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++)
        PyList_SET_ITEM(list, i, Py_NewRef(v));
    return list;
}

/* encoding._plain_call's BatchEncoding of tok(text, add_special_tokens=add,
 * return_offsets_mapping=offsets), its fields and columns set as it sets them, from the plan it
 * keeps: 1 with *result set, 0 where the Python method must answer (no plan kept yet, or one for
 * the general path, a backend of its own, the pure path's offsets), -1 on an error. */
static int plain_call(FastEncode *self, PyObject *tok, PyObject *text, int add, int offsets, PyObject **result) {
    /* a subclass may answer otherwise (its own encode, which _plain_call calls): its method's */
    PyObject *own = PyDict_GetItemWithError(Py_TYPE(tok)->tp_dict, call_name[N_DUNDER_CALL]);
    if (own != (PyObject *)self)
        return PyErr_Occurred() ? -1 : 0;
    PyObject **where = _PyObject_GetDictPtr(tok), *dict = where ? *where : NULL;
    if (!dict)
        return 0;
    PyObject *meta = dict_ref(dict, str_meta), *plan = NULL, *ids = NULL, *spans = NULL, *laid = NULL, *fast = NULL,
             *found = NULL;
    int ok = meta ? own_backend(meta) : PyErr_Occurred() ? -1 : 0;
    if (ok == 1)
        ok = plain_plan(dict, meta, add, offsets, &plan) < 0 ? -1 : plan != NULL;
    /* (post, (before, before_types, type_id, after, after_types), trim, type_ids, attention,
     * native_offsets): _plain_plan's */
    PyObject *layout = ok == 1 && PyTuple_CheckExact(plan) && PyTuple_GET_SIZE(plan) == 6 ? PyTuple_GET_ITEM(plan, 1)
                                                                                          : NULL;
    if (ok == 1 && !(layout && PyTuple_CheckExact(layout) && PyTuple_GET_SIZE(layout) == 5))
        ok = 0;
    PyObject *before = NULL, *after = NULL;
    if (ok == 1) {
        before = PyTuple_GET_ITEM(layout, 0);
        after = PyTuple_GET_ITEM(layout, 3);
        if (!PyList_CheckExact(before) || !PyList_CheckExact(after) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(layout, 1)) || !PyList_CheckExact(PyTuple_GET_ITEM(layout, 4)))
            ok = 0;
    }
    if (ok == 1 && !offsets) {
        ok = fast_state(tok, &fast);
        if (ok == 1) {
            PyObject *call[3] = {PyTuple_GET_ITEM(fast, 1), text, Py_False};
            ids = Encoder_encode_text((Encoder *)PyTuple_GET_ITEM(fast, 0), call, 3);
            Py_ssize_t end = ids ? PyList_GET_SIZE(ids) + PyList_GET_SIZE(before) : 0;
            if (!ids || (PyList_GET_SIZE(before) && PyList_SetSlice(ids, 0, 0, before) < 0) ||
                (PyList_GET_SIZE(after) && PyList_SetSlice(ids, end, end, after) < 0))
                ok = -1;
        }
    } else if (ok == 1) {
        PyObject *split = PyObject_GetAttr(meta, str_split_special_tokens), *native = PyTuple_GET_ITEM(plan, 5);
        ok = !split ? -1 : split == Py_False && native != Py_None;
        Py_XDECREF(split);
        if (ok == 1) {
            laid = PyObject_Vectorcall(native, (PyObject *[]){text, PyTuple_GET_ITEM(plan, 2), before, after}, 4, NULL);
            ok = !laid ? -1 : PyTuple_CheckExact(laid) && PyTuple_GET_SIZE(laid) == 2;
            if (ok == 1) {
                ids = Py_NewRef(PyTuple_GET_ITEM(laid, 0));
                spans = Py_NewRef(PyTuple_GET_ITEM(laid, 1));
                ok = PyList_CheckExact(ids);
            }
        }
    }
    if (ok == 1) {
        PyTypeObject *cls = (PyTypeObject *)self->batch;
        PyObject *none = PyTuple_New(0);
        found = none ? cls->tp_new(cls, none, NULL) : NULL;
        Py_XDECREF(none);
        PyObject *one = PyLong_FromLong(1);
        if (!one)
            Py_CLEAR(found);
        PyObject *fields[7] = {Py_None, Py_None, one, tok, text, PyTuple_GET_ITEM(plan, 0), add ? Py_True : Py_False};
        for (int i = 0; found && i < 7; i++)
            if (PyObject_SetAttr(found, call_name[N_GET_ENCODINGS + i], fields[i]) < 0)
                Py_CLEAR(found);
        if (found && PyDict_SetItem(found, call_name[N_INPUT_IDS], ids) < 0)
            Py_CLEAR(found);
        Py_ssize_t n = PyList_GET_SIZE(ids);
        int type_ids = found ? PyObject_IsTrue(PyTuple_GET_ITEM(plan, 3)) : 0;
        int attention = found && type_ids >= 0 ? PyObject_IsTrue(PyTuple_GET_ITEM(plan, 4)) : 0;
        if (type_ids < 0 || attention < 0)
            Py_CLEAR(found);
        if (found && type_ids) {
            /* the special tokens' type ids over the list's ends, as _plain_call writes them */
            PyObject *head = PyTuple_GET_ITEM(layout, 1), *tail = PyTuple_GET_ITEM(layout, 4);
            Py_ssize_t h = PyList_GET_SIZE(head), t = PyList_GET_SIZE(tail);
            PyObject *types = list_of(PyTuple_GET_ITEM(layout, 2), n);
            if (!types || (h && PyList_SetSlice(types, 0, h < n ? h : n, head) < 0) ||
                (t && PyList_SetSlice(types, PyList_GET_SIZE(types) - t > 0 ? PyList_GET_SIZE(types) - t : 0,
                                      PyList_GET_SIZE(types), tail) < 0) ||
                PyDict_SetItem(found, call_name[N_TOKEN_TYPE_IDS], types) < 0)
                Py_CLEAR(found);
            Py_XDECREF(types);
        }
        if (found && attention) {
            PyObject *mask = list_of(one, n);
            if (!mask || PyDict_SetItem(found, call_name[N_ATTENTION_MASK], mask) < 0)
                Py_CLEAR(found);
            Py_XDECREF(mask);
        }
        if (found && offsets && PyDict_SetItem(found, call_name[N_OFFSET_MAPPING], spans) < 0)
            Py_CLEAR(found);
        Py_XDECREF(one);
        ok = found ? 1 : -1;
    }
    Py_XDECREF(meta);
    Py_XDECREF(plan);
    Py_XDECREF(fast);
    Py_XDECREF(laid);
    Py_XDECREF(ids);
    Py_XDECREF(spans);
    *result = found;
    return ok;
}

/* 1 when kwnames[0..nkw) are only add_special_tokens and (where offsets is given)
 * return_offsets_mapping, with exact bools (args' values from args[0] on) into *add and *offsets */
static int call_flags(PyObject *const *args, PyObject *kwnames, Py_ssize_t nkw, int *add, int *offsets) {
    *add = 1;
    if (offsets)
        *offsets = 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (!PyBool_Check(args[i]))
            return 0;
        if (name == str_add_special_tokens || PyUnicode_Compare(name, str_add_special_tokens) == 0)
            *add = args[i] == Py_True;
        else if (offsets &&
                 (name == call_name[N_RETURN_OFFSETS] || PyUnicode_Compare(name, call_name[N_RETURN_OFFSETS]) == 0))
            *offsets = args[i] == Py_True;
        else
            return 0;
    }
    return 1;
}

static PyObject *FastEncode_vectorcall(FastEncode *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    int add, offsets;
    if (self->mode == FAST_CALL) {
        if (nargs == 2 && PyUnicode_CheckExact(args[1]) && call_flags(args + 2, kwnames, nkw, &add, &offsets)) {
            PyObject *found = NULL;
            int ok = plain_call(self, args[0], args[1], add, offsets, &found);
            if (ok)
                return ok < 0 ? NULL : found;
        }
        return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    }
    if (nargs == 2 && PyUnicode_CheckExact(args[1]) && call_flags(args + 2, kwnames, nkw, &add, NULL)) {
        PyObject *fast = NULL;
        int ok = self->mode == FAST_NUMPY ? numpy_found() : 1;
        if (ok > 0)
            ok = fast_state(args[0], &fast);
        if (ok < 0)
            return NULL;
        if (ok) {
            PyObject *call[3] = {PyTuple_GET_ITEM(fast, 1), args[1], add ? Py_True : Py_False};
            Encoder *encoder = (Encoder *)PyTuple_GET_ITEM(fast, 0);
            PyObject *ids = self->mode == FAST_NUMPY ? Encoder_encode_u32(encoder, call, 3) : Encoder_encode_text(encoder, call, 3);
            Py_DECREF(fast);
            if (ids && self->mode == FAST_NUMPY) {
                PyObject *array = PyObject_Vectorcall(np_frombuffer, (PyObject *[]){ids, np_uint32}, 2, NULL);
                Py_DECREF(ids);
                ids = array;
            }
            return ids;
        }
    }
    return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
}

/* FastEncode(func[, mode[, batch]]): func as the descriptor above, Tokenizer.encode (mode
 * FAST_ENCODE), encode_to_numpy (FAST_NUMPY) or __call__ (FAST_CALL, batch the BatchEncoding class). */
static PyObject *FastEncode_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *func, *batch = Py_None;
    int mode = FAST_ENCODE;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "FastEncode() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O|iO:FastEncode", &func, &mode, &batch))
        return NULL;
    if (!PyCallable_Check(func)) {
        PyErr_SetString(PyExc_TypeError, "FastEncode() takes the Python method it stands for");
        return NULL;
    }
    if (mode < FAST_ENCODE || mode > FAST_CALL || (mode == FAST_CALL) != PyType_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "FastEncode() takes a mode 0 to 2, and a class with mode 2 only");
        return NULL;
    }
    FastEncode *self = (FastEncode *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->vectorcall = (vectorcallfunc)FastEncode_vectorcall;
    self->func = Py_NewRef(func);
    self->mode = mode;
    self->batch = Py_NewRef(batch);
    return (PyObject *)self;
}

static int FastEncode_traverse(FastEncode *self, visitproc visit, void *arg) {
    Py_VISIT(self->func);
    Py_VISIT(self->batch);
    return 0;
}

static int FastEncode_clear(FastEncode *self) {
    Py_CLEAR(self->func);
    Py_CLEAR(self->batch);
    return 0;
}

static void FastEncode_dealloc(FastEncode *self) {
    PyObject_GC_UnTrack(self);
    FastEncode_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Everything but the call and the class is the Python method's: its name, doc, __wrapped__ for
 * inspect.signature, so that help(tok.encode) shows the method's signature and doc. */
static PyObject *FastEncode_getattro(FastEncode *self, PyObject *name) {
    if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0)
        return Py_NewRef(self->func);
    if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "__class__") == 0)
        return PyObject_GenericGetAttr((PyObject *)self, name);
    return PyObject_GetAttr(self->func, name);
}

static PyObject *FastEncode_repr(FastEncode *self) { return PyObject_Repr(self->func); }

/* Through the class, the Python function (Tokenizer.encode(tok, text) and help(Tokenizer.encode)
 * see it); through a tokenizer, a bound method of this descriptor. */
static PyObject *FastEncode_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None)
        return Py_NewRef(((FastEncode *)self)->func);
    return PyMethod_New(self, obj);
}

static PyTypeObject FastEncodeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.FastEncode",
    .tp_basicsize = sizeof(FastEncode),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(FastEncode, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = FastEncode_new,
    .tp_traverse = (traverseproc)FastEncode_traverse,
    .tp_clear = (inquiry)FastEncode_clear,
    .tp_dealloc = (destructor)FastEncode_dealloc,
    .tp_getattro = (getattrofunc)FastEncode_getattro,
    .tp_repr = (reprfunc)FastEncode_repr,
    .tp_descr_get = FastEncode_get,
    .tp_doc = "FastEncode(func[, mode[, batch]]): Tokenizer.encode, encode_to_numpy (mode 1) or __call__ (mode 2)\n"
              "with the common call in C, on the class.",
};

/* ---- Normalizer ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    NormOp op;        /* the step of a single normalizer */
    NormOp *ops;      /* the steps to run: &op, or a Sequence's flattened members' */
    size_t nops;
    Charsmap map;     /* points into units and repl, owned here */
    uint32_t *units;
    uint8_t *repl;
    uint32_t *pat, *rep; /* Replace's literal and content, Prepend's text */
    PyObject *members; /* a Sequence's Normalizers, whose steps ops points into */
    PyObject *pure;   /* the pure-Python normalizer, which raises the errors of its input */
} Normalizer;

static void Normalizer_dealloc(Normalizer *self) {
    charsmap_free(&self->map);
    free(self->units);
    free(self->repl);
    PyMem_Free(self->pat);
    PyMem_Free(self->rep);
    if (self->ops != &self->op)
        free(self->ops);
    Py_XDECREF(self->members);
    Py_XDECREF(self->pure);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int native_ops(PyObject *normalizer, const NormOp **ops, size_t *nops) {
    if (normalizer == Py_None) {
        *ops = NULL;
        *nops = 0;
        return 1;
    }
    if (Py_TYPE(normalizer) != &NormalizerType || !((Normalizer *)normalizer)->pure)
        return 0;
    *ops = ((Normalizer *)normalizer)->ops;
    *nops = ((Normalizer *)normalizer)->nops;
    return 1;
}

/* A str's code points for a Replace or Prepend step (PyMem). */
static uint32_t *ucs4(PyObject *s, size_t *n) {
    if (!s || !PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "replace and prepend take str pattern and content");
        return NULL;
    }
    *n = (size_t)PyUnicode_GET_LENGTH(s);
    return *n ? PyUnicode_AsUCS4Copy(s) : PyMem_Malloc(sizeof(uint32_t));
}

/* Normalizer(pure, "bert", flags=BERT_* bits), Normalizer(pure, "nfc"),
 * Normalizer(pure, "precompiled", units=<little-endian u32 bytes>, replacements=<bytes>),
 * Normalizer(pure, "replace", pattern=<non-empty literal>, content=<str>),
 * Normalizer(pure, "prepend", content=<str>), Normalizer(pure, "nfkd" | "strip_accents" | "lowercase"),
 * Normalizer(pure, "runs", pattern=<one character>, content=<str>, flags=<shortest run>),
 * Normalizer(pure, "space_runs", content=<str>) (each run of \s characters) or
 * Normalizer(pure, "sequence", members=<Normalizers>) */
static int Normalizer_init(Normalizer *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"pure", "kind", "flags", "units", "replacements", "pattern", "content", "members", NULL};
    PyObject *pure, *pattern = NULL, *content = NULL, *members = NULL;
    const char *kind;
    int flags = 0;
    Py_buffer units = {0}, repl = {0};
    if (self->pure) {
        PyErr_SetString(PyExc_RuntimeError, "Normalizer is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|$iy*y*OOO", kwlist, &pure, &kind, &flags, &units, &repl,
                                     &pattern, &content, &members))
        return -1;
    int err = 0;
    self->ops = &self->op;
    self->nops = 1;
    if (strcmp(kind, "bert") == 0) {
        self->op.kind = NORM_BERT;
        self->op.flags = flags & (BERT_CLEAN | BERT_CHINESE | BERT_STRIP | BERT_LOWER);
    } else if (strcmp(kind, "nfc") == 0) {
        self->op.kind = NORM_NFC;
    } else if (strcmp(kind, "nfkd") == 0) {
        self->op.kind = NORM_NFKD;
    } else if (strcmp(kind, "strip_accents") == 0) {
        self->op.kind = NORM_STRIP_ACCENTS;
    } else if (strcmp(kind, "lowercase") == 0) {
        self->op.kind = NORM_LOWERCASE;
    } else if (strcmp(kind, "runs") == 0) {
        self->op.kind = NORM_RUNS;
        self->op.flags = flags;
        if (!(self->pat = ucs4(pattern, &self->op.npat)) || !(self->rep = ucs4(content, &self->op.nrep))) {
            err = -1;
        } else if (self->op.npat != 1 || flags < 1) {
            PyErr_SetString(PyExc_ValueError, "runs needs one character and a shortest run of at least 1");
            err = -1;
        }
        self->op.pat = self->pat;
        self->op.rep = self->rep;
    } else if (strcmp(kind, "space_runs") == 0) {
        self->op.kind = NORM_RUNS;
        self->op.flags = 1;
        if (!(self->rep = ucs4(content, &self->op.nrep)))
            err = -1;
        self->op.rep = self->rep;
    } else if (strcmp(kind, "precompiled") == 0) {
        self->op.kind = NORM_PRECOMPILED;
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
            self->op.map = &self->map;
        }
    } else if (strcmp(kind, "replace") == 0 || strcmp(kind, "prepend") == 0) {
        int replace = kind[0] == 'r';
        self->op.kind = replace ? NORM_REPLACE : NORM_PREPEND;
        if ((replace && !(self->pat = ucs4(pattern, &self->op.npat))) || !(self->rep = ucs4(content, &self->op.nrep)))
            err = -1;
        else if (replace && !self->op.npat) {
            PyErr_SetString(PyExc_ValueError, "replace needs a non-empty pattern");
            err = -1;
        }
        self->op.pat = self->pat;
        self->op.rep = self->rep;
    } else if (strcmp(kind, "sequence") == 0) {
        if (!members || !PyTuple_Check(members)) {
            PyErr_SetString(PyExc_TypeError, "sequence needs members=<tuple of Normalizers>");
            return -1;
        }
        size_t total = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(members); i++) {
            const NormOp *ops;
            size_t nops;
            if (!native_ops(PyTuple_GET_ITEM(members, i), &ops, &nops) || PyTuple_GET_ITEM(members, i) == Py_None) {
                PyErr_SetString(PyExc_TypeError, "sequence members must be initialised Normalizers");
                return -1;
            }
            total += nops;
        }
        if (!(self->ops = malloc((total ? total : 1) * sizeof *self->ops))) {
            self->ops = &self->op;
            PyErr_NoMemory();
            return -1;
        }
        self->nops = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(members); i++) {
            const NormOp *ops = NULL;
            size_t nops = 0;
            native_ops(PyTuple_GET_ITEM(members, i), &ops, &nops);
            memcpy(self->ops + self->nops, ops, nops * sizeof *ops);
            self->nops += nops;
        }
        self->members = Py_NewRef(members);
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
    size_t n = (size_t)PyUnicode_GET_LENGTH(text), rn = 0;
    uint32_t *in = malloc((n ? n : 1) * sizeof *in);
    CpBuf bufs[3] = {{0}};
    const uint32_t *res = NULL;
    int err = 0;
    if (!in)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++)
        in[i] = PyUnicode_READ(kind, data, i);
    err = normalize_ops(self->ops, self->nops, in, n, bufs, &res, &rn);
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (err == -2)
        result = PyObject_CallOneArg(self->pure, text);
    else if (err < 0)
        result = PyErr_NoMemory();
    else if (rn == n && (n == 0 || memcmp(res, in, n * sizeof *in) == 0))
        result = Py_NewRef(text);
    else
        result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, res, (Py_ssize_t)rn);
    free(in);
    for (int i = 0; i < 3; i++)
        free(bufs[i].v);
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

/* ---- pymtok._native.Decoder: decode.c's chain behind Tokenizer.decode ------------------- */

typedef struct {
    PyObject_HEAD
    Decoder d;
    TokList out, tmp; /* reused by every call: the GIL is held throughout, so calls never overlap */
} DecoderObject;

static const char *const decoder_kinds[] = {
    "", "byte_level", "byte_fallback", "fuse", "metaspace", "wordpiece", "replace", "strip", "bpe", "ctc",
    "sentencepiece",
};

static uint8_t *copy_bytes(const char *s, Py_ssize_t n) {
    uint8_t *p = malloc((size_t)n + 1);
    if (p)
        memcpy(p, s, (size_t)n);
    return p;
}

/* One step tuple, e.g. ("replace", pattern, content), as decode.c's DecStep. */
static int parse_decoder_step(PyObject *t, DecStep *st) {
    memset(st, 0, sizeof *st);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {
        PyErr_SetString(PyExc_TypeError, "Decoder steps are tuples (kind, ...)");
        return -1;
    }
    int kind = lookup(PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0)), decoder_kinds, sizeof decoder_kinds / sizeof *decoder_kinds);
    if (kind <= 0) {
        PyErr_Format(PyExc_ValueError, "unknown decoder step %R", PyTuple_GET_ITEM(t, 0));
        return -1;
    }
    st->kind = kind;
    const char *a = "", *b = "", *kind_name;
    Py_ssize_t na = 0, nb = 0, start = 0, stop = 0;
    int flag = 0, ok;
    switch (kind) {
    case DEC_REPLACE:
    case DEC_CTC:
        ok = kind == DEC_REPLACE ? PyArg_ParseTuple(t, "ss#s#", &kind_name, &a, &na, &b, &nb)
                                 : PyArg_ParseTuple(t, "ss#s#p", &kind_name, &a, &na, &b, &nb, &flag);
        break;
    case DEC_STRIP:
        ok = PyArg_ParseTuple(t, "ss#nn", &kind_name, &a, &na, &start, &stop);
        break;
    case DEC_METASPACE:
    case DEC_WORDPIECE:
        ok = PyArg_ParseTuple(t, "ss#p", &kind_name, &a, &na, &flag);
        break;
    case DEC_BPE:
        ok = PyArg_ParseTuple(t, "ss#", &kind_name, &a, &na);
        break;
    case DEC_SENTENCEPIECE: {
        int strip, remove_extra;
        ok = PyArg_ParseTuple(t, "ss#pp", &kind_name, &a, &na, &strip, &remove_extra);
        flag = (strip ? DEC_SP_STRIP : 0) | (remove_extra ? DEC_SP_REMOVE_EXTRA : 0);
        break;
    }
    default:
        ok = PyArg_ParseTuple(t, "s", &kind_name);
    }
    if (!ok)
        return -1;
    /* every pattern searched for must be non-empty (native.py leaves the others to Python) */
    if ((kind == DEC_REPLACE || kind == DEC_METASPACE || kind == DEC_BPE || kind == DEC_CTC || kind == DEC_STRIP) && !na) {
        PyErr_SetString(PyExc_ValueError, "Decoder step with an empty pattern");
        return -1;
    }
    if (kind == DEC_CTC && !nb) {
        PyErr_SetString(PyExc_ValueError, "Decoder step with an empty pattern");
        return -1;
    }
    st->a = copy_bytes(a, na);
    st->b = copy_bytes(b, nb);
    if (!st->a || !st->b) {
        free(st->a), free(st->b);
        PyErr_NoMemory();
        return -1;
    }
    st->na = (size_t)na;
    st->nb = (size_t)nb;
    st->start = start < 0 ? 0 : (size_t)start;
    st->stop = stop < 0 ? 0 : (size_t)stop;
    st->flag = flag;
    return 0;
}

/* Each id's token as UTF-8 (*from[id], *len[id]), or NULL: the list's str, else, with records,
 * the record of the id unless hidden holds it. A str's bytes are its own (valid while the list
 * is alive), a record's the tables'. */
static int decoder_sources(PyObject *tokens, PyObject *records, PyObject *hidden, const uint8_t ***from,
                           size_t **len) {
    size_t n = (size_t)PyList_GET_SIZE(tokens);
    *from = calloc(n + 1, sizeof **from);
    *len = calloc(n + 1, sizeof **len);
    if (!*from || !*len) {
        PyErr_NoMemory();
        return -1;
    }
    const MtokIndex *x = NULL;
    if (records != Py_None && !(x = mtok_index(records)))
        return -1;
    for (size_t pos = 0, k = 0; x && k < x->count; k++) {
        MtokRecord r = mtok_record_next(x, &pos);
        if (r.id < n) {
            (*from)[r.id] = r.token;
            (*len)[r.id] = r.len;
        }
    }
    for (Py_ssize_t i = 0; hidden && i < PyTuple_GET_SIZE(hidden); i++) {
        Py_ssize_t id = PyLong_AsSsize_t(PyTuple_GET_ITEM(hidden, i));
        if (id == -1 && PyErr_Occurred())
            return -1;
        if (id >= 0 && (size_t)id < n)
            (*from)[id] = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(tokens, i);
        Py_ssize_t size = 0;
        if (t == Py_None)
            continue;
        if (!((*from)[i] = (const uint8_t *)PyUnicode_AsUTF8AndSize(t, &size)))
            return -1;
        (*len)[i] = (size_t)size;
    }
    return 0;
}

static int DecoderObject_init(DecoderObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"tokens", "specials", "steps", "space_join", "kinds", "records", "hidden", NULL};
    PyObject *tokens, *specials, *steps, *records = Py_None, *hidden = NULL;
    int space_join;
    const char *kinds = NULL;
    Py_ssize_t nkinds = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!p|y#OO!", kwlist, &PyList_Type, &tokens, &PyList_Type,
                                     &specials, &PyTuple_Type, &steps, &space_join, &kinds, &nkinds, &records,
                                     &PyTuple_Type, &hidden))
        return -1;
    decoder_free(&self->d);
    Decoder *d = &self->d;
    size_t n = (size_t)PyList_GET_SIZE(tokens), total = 0, *len = NULL;
    const uint8_t **from = NULL;
    if (decoder_sources(tokens, records, hidden, &from, &len) < 0)
        goto fail;
    d->n = n;
    d->space_join = space_join;
    d->flags = calloc(n + 1, 1);
    d->off = malloc((n + 1) * sizeof *d->off);
    if (!d->flags || !d->off)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        total += from[i] ? len[i] : 0;
    d->pool = calloc(total + 16, 1); /* decode.c copies short tokens as 16 bytes */
    if (!d->pool)
        goto nomem;
    total = 0;
    for (size_t i = 0; i < n; i++) {
        d->off[i] = total;
        if (!from[i])
            continue;
        memcpy(d->pool + total, from[i], len[i]);
        total += len[i];
        d->flags[i] = DEC_PRESENT;
    }
    d->off[n] = total;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(specials); i++) {
        Py_ssize_t id = PyLong_AsSsize_t(PyList_GET_ITEM(specials, i));
        if (id == -1 && PyErr_Occurred())
            goto fail;
        if (id >= 0 && (size_t)id < n)
            d->flags[id] |= DEC_SPECIAL;
    }
    for (size_t i = 0; i < n && i < (size_t)nkinds; i++)
        if (d->flags[i] & DEC_PRESENT)
            d->flags[i] |= (uint8_t)(kinds[i] & (DEC_CONTROL | DEC_UNK | DEC_BYTE_PIECE));
    size_t nsteps = (size_t)PyTuple_GET_SIZE(steps);
    DecStep *parsed = calloc(nsteps + 1, sizeof *parsed);
    if (!parsed)
        goto nomem;
    for (size_t k = 0; k < nsteps; k++) {
        if (parse_decoder_step(PyTuple_GET_ITEM(steps, k), &parsed[k]) < 0) {
            for (size_t j = 0; j < k; j++)
                free(parsed[j].a), free(parsed[j].b);
            free(parsed);
            goto fail;
        }
    }
    if (decoder_fold(d, parsed, nsteps) < 0)
        goto nomem;
    free(from);
    free(len);
    return 0;
nomem:
    PyErr_NoMemory();
fail:
    free(from);
    free(len);
    decoder_free(&self->d);
    return -1;
}

static void DecoderObject_dealloc(DecoderObject *self) {
    decoder_free(&self->d);
    toklist_free(&self->out);
    toklist_free(&self->tmp);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

enum { IDS_ON_STACK = 256, KEEP_BUFFER = 1 << 22 };

/* decode(ids, skip_special_tokens) -> str, or None when ids is not a list or tuple of ints
 * (Tokenizer.decode then checks and converts them itself and calls again). */
static PyObject *DecoderObject_decode(DecoderObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode(ids, skip_special_tokens)");
        return NULL;
    }
    PyObject *seq = args[0];
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq))
        Py_RETURN_NONE;
    int skip = PyObject_IsTrue(args[1]);
    if (skip < 0)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    uint32_t stack[IDS_ON_STACK], *ids = n <= IDS_ON_STACK ? stack : malloc((size_t)n * sizeof *ids);
    if (!ids)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = items[i];
        if (!PyLong_CheckExact(o)) {
            if (ids != stack)
                free(ids);
            Py_RETURN_NONE;
        }
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || v < 0 || v > (long long)UINT32_MAX) {
            if (ids != stack)
                free(ids);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_OverflowError, "token id %R is out of range: ids are unsigned 32-bit, as in HF", o);
            return NULL;
        }
        ids[i] = (uint32_t)v;
    }
    int rc = decoder_run(&self->d, ids, (size_t)n, skip, &self->out, &self->tmp);
    if (ids != stack)
        free(ids);
    PyObject *text = rc < 0 ? PyErr_NoMemory()
                            : PyUnicode_DecodeUTF8((const char *)self->out.buf, (Py_ssize_t)self->out.len, "replace");
    if (self->out.cap > KEEP_BUFFER)
        toklist_free(&self->out);
    if (self->tmp.cap > KEEP_BUFFER)
        toklist_free(&self->tmp);
    return text;
}

static PyMethodDef DecoderObject_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))DecoderObject_decode, METH_FASTCALL,
     "decode(ids, skip_special_tokens) -> str | None (None: ids not a list or tuple of ints)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.Decoder",
    .tp_basicsize = sizeof(DecoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)DecoderObject_init,
    .tp_dealloc = (destructor)DecoderObject_dealloc,
    .tp_methods = DecoderObject_methods,
    .tp_doc = "Decoder(tokens, specials, steps, space_join, kinds=b'', records=None, hidden=()): a decoder chain over a token table "
              "(tokens[id] a str or None; specials the ids skip_special_tokens drops; kinds[id] the "
              "SentencePiece decoder's CONTROL, UNK or BYTE_PIECE flags; records, MtokTables, the token "
              "of an id whose tokens[id] is None, unless hidden holds the id).",
};

/* pymtok._native.DecodeStream(decoder, skip_special_tokens): HF's DecodeStream on a Decoder. */
typedef struct {
    PyObject_HEAD
    DecoderObject *decoder;
    int skip;
    DecodeStreamState st;
} DecodeStreamObject;

static int DecodeStreamObject_init(DecodeStreamObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"decoder", "skip_special_tokens", NULL};
    PyObject *decoder;
    int skip;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!p", kwlist, &DecoderType, &decoder, &skip))
        return -1;
    Py_INCREF(decoder);
    Py_XSETREF(self->decoder, (DecoderObject *)decoder);
    self->skip = skip;
    decode_stream_free(&self->st);
    return 0;
}

static void DecodeStreamObject_dealloc(DecodeStreamObject *self) {
    Py_XDECREF(self->decoder);
    decode_stream_free(&self->st);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* An id as Tokenizer._token_id takes one: an int (or __index__, not bool) that fits u32. */
static int token_id_of(PyObject *o, uint32_t *id) {
    PyObject *v = PyBool_Check(o) || !PyIndex_Check(o) ? NULL : PyNumber_Index(o);
    if (!v) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "token ids must be int, got %s", Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < 0 || x > (long long)UINT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "token id %R is out of range: ids are unsigned 32-bit, as in HF", v);
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    *id = (uint32_t)x;
    return 0;
}

static PyObject *DecodeStreamObject_step(DecodeStreamObject *self, PyObject *arg) {
    uint32_t id;
    if (!self->decoder) {
        PyErr_SetString(PyExc_TypeError, "DecodeStream was not initialized");
        return NULL;
    }
    if (token_id_of(arg, &id) < 0)
        return NULL;
    size_t start = 0;
    DecodeStreamState *st = &self->st;
    int rc = decode_stream_step(&self->decoder->d, st, id, self->skip, &start);
    if (rc < 0)
        return PyErr_NoMemory();
    if (rc == STREAM_NONE)
        Py_RETURN_NONE;
    if (rc == STREAM_TEXT)
        return PyUnicode_DecodeUTF8((const char *)st->text.buf + start, (Py_ssize_t)(st->text.len - start), "strict");
    PyObject *text = PyUnicode_DecodeUTF8((const char *)st->text.buf, (Py_ssize_t)st->text.len, "strict");
    PyObject *prefix = PyUnicode_DecodeUTF8((const char *)st->prefix.buf, (Py_ssize_t)st->prefix.len, "strict");
    if (text && prefix)
        PyErr_Format(PyExc_ValueError, "decode stream: text %R no longer starts with the emitted %R", text, prefix);
    Py_XDECREF(text);
    Py_XDECREF(prefix);
    return NULL;
}

static PyMethodDef DecodeStreamObject_methods[] = {
    {"step", (PyCFunction)DecodeStreamObject_step, METH_O,
     "step(id) -> str | None: the text id completes, None while a character is incomplete"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecodeStreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.DecodeStream",
    .tp_basicsize = sizeof(DecodeStreamObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)DecodeStreamObject_init,
    .tp_dealloc = (destructor)DecodeStreamObject_dealloc,
    .tp_methods = DecodeStreamObject_methods,
    .tp_doc = "DecodeStream(decoder, skip_special_tokens): HF's DecodeStream over a Decoder.",
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

/* ---- SentencePieceModel ---------------------------------------------------------------- */

/* text[a, b) as UTF-8, appended (a str without lone surrogates) */
static int utf8_of_str(int kind, const void *data, size_t a, size_t b, SpBytes *o) {
    if (o->cap - o->n < 4 * (b - a)) {
        size_t c = o->n + 4 * (b - a) + 64;
        uint8_t *v = realloc(o->v, c);
        if (!v)
            return -1;
        o->v = v;
        o->cap = c;
    }
    for (size_t i = a; i < b; i++)
        o->n += utf8_put(PyUnicode_READ(kind, data, i), o->v + o->n);
    return 0;
}

/* A whole str's UTF-8 (no lone surrogates): an ASCII str's own bytes, else converted into *o;
 * PyUnicode_AsUTF8AndSize would keep a copy on the caller's str for as long as it lives. */
static const uint8_t *str_utf8(PyObject *text, SpBytes *o, size_t *len) {
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    *len = n;
    if (PyUnicode_IS_ASCII(text))
        return PyUnicode_DATA(text);
    if (utf8_of_str(PyUnicode_KIND(text), PyUnicode_DATA(text), 0, n, o) < 0)
        return NULL;
    *len = o->n;
    return o->v;
}


typedef struct {
    PyObject_HEAD
    SpModel model;
    int ready;
    Ints ints;
    IdBuf prefix, suffix; /* encode_text's special tokens (set_post) */
} SentencePieceModel;

static void SentencePieceModel_dealloc(SentencePieceModel *self) {
    if (self->ready)
        sp_model_free(&self->model);
    ints_free(&self->ints);
    free(self->prefix.v);
    free(self->suffix.v);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int SentencePieceModel_init(SentencePieceModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"kind", "pieces", "types", "scores", "unk_id", "byte_fallback", NULL};
    const char *kind;
    PyObject *pieces, *scores;
    Py_buffer types;
    int unk_id, byte_fallback;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!y*O!ip", kwlist, &kind, &PyList_Type, &pieces, &types,
                                     &PyList_Type, &scores, &unk_id, &byte_fallback))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(pieces);
    int k = !strcmp(kind, "BPE") ? SP_KIND_BPE : !strcmp(kind, "Unigram") ? SP_KIND_UNIGRAM : -1;
    int rc = -1;
    const uint8_t **keys = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *keys);
    size_t *lens = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *lens);
    float *f32 = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *f32);
    if (!keys || !lens || !f32) {
        PyErr_NoMemory();
        goto done;
    }
    if (k < 0 || types.len != n || PyList_GET_SIZE(scores) != n || unk_id < 0 || unk_id >= n) {
        PyErr_SetString(PyExc_ValueError, "SentencePieceModel: kind 'BPE' or 'Unigram', one type and score per "
                                          "piece, unk_id a piece's id");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        PyObject *piece = PyList_GET_ITEM(pieces, i);
        keys[i] = PyUnicode_Check(piece) ? (const uint8_t *)PyUnicode_AsUTF8AndSize(piece, &len) : NULL;
        double score = PyFloat_AsDouble(PyList_GET_ITEM(scores, i));
        if (!keys[i] || (score == -1.0 && PyErr_Occurred())) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "SentencePieceModel: pieces must be str");
            goto done;
        }
        lens[i] = (size_t)len;
        f32[i] = (float)score;
    }
    if (self->ready)
        sp_model_free(&self->model);
    self->ready = 0;
    ints_free(&self->ints);
    if (ints_init(&self->ints, (size_t)n) < 0 ||
        sp_model_init(&self->model, k, keys, lens, types.buf, f32, (size_t)n, unk_id, byte_fallback) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    self->ready = 1;
    rc = 0;
done:
    PyBuffer_Release(&types);
    PyMem_Free(keys);
    PyMem_Free(lens);
    PyMem_Free(f32);
    return rc;
}

static PyObject *SentencePieceModel_encode(SentencePieceModel *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode(text: str, offset: int)");
        return NULL;
    }
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "SentencePieceModel is not initialised");
        return NULL;
    }
    PyObject *text = args[0];
    size_t n;
    if (encodable_length(text, &n) < 0)
        return NULL;
    SpBytes own = {0};
    size_t len;
    const uint8_t *utf8 = str_utf8(text, &own, &len);
    if (!utf8)
        return PyErr_NoMemory();
    IdBuf out = {0};
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = sp_model_encode(&self->model, utf8, len, &out);
    Py_END_ALLOW_THREADS
    free(own.v);
    PyObject *list = err ? PyErr_NoMemory() : ids_within(self->ints, &no_ids, &out, &no_ids);
    free(out.v);
    return list;
}

static PyObject *SentencePieceModel_set_post(SentencePieceModel *self, PyObject *args) {
    PyObject *prefix, *suffix;
    if (!PyArg_ParseTuple(args, "OO:set_post", &prefix, &suffix) || read_ids(prefix, &self->prefix) < 0 ||
        read_ids(suffix, &self->suffix) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *SentencePieceModel_encode_text(SentencePieceModel *self, PyObject *const *args, Py_ssize_t nargs);

static PyMethodDef SentencePieceModel_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))SentencePieceModel_encode, METH_FASTCALL,
     "encode(text, offset) -> list[int]: the ids of a whole normalized text (offset unused)."},
    {"set_post", (PyCFunction)SentencePieceModel_set_post, METH_VARARGS,
     "set_post(prefix, suffix): the ids encode_text's add_special_tokens puts around a text's."},
    {"encode_text", (PyCFunction)(void (*)(void))SentencePieceModel_encode_text, METH_FASTCALL,
     "encode_text(normalizer, text, add_special_tokens) -> list[int]: a SentencePieceNormalizer (or None)\n"
     "and this model on a raw text, a part at a time; ValueError for a lone surrogate, as Tokenizer.encode."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SentencePieceModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.SentencePieceModel",
    .tp_basicsize = sizeof(SentencePieceModel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)SentencePieceModel_init,
    .tp_dealloc = (destructor)SentencePieceModel_dealloc,
    .tp_methods = SentencePieceModel_methods,
    .tp_doc = "The sentencepiece library's BPE or Unigram model (pymtok.models.SentencePieceBPE / "
              "SentencePieceUnigram) on whole normalized texts.",
};

/* ---- SentencePieceNormalizer ------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    SpNormalizer norm;
    uint32_t *units;
    uint8_t *repl;
    PyObject *pure; /* the pure normalizer: it raises the errors of a bad charsmap */
} SentencePieceNormalizer;

static void SentencePieceNormalizer_dealloc(SentencePieceNormalizer *self) {
    sp_normalizer_free(&self->norm);
    free(self->units);
    free(self->repl);
    Py_XDECREF(self->pure);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* SentencePieceNormalizer(pure, units=<little-endian u32 bytes>, replacements=<bytes>, user=<list[str]>,
 * add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, treat_whitespace_as_suffix) */
static int SentencePieceNormalizer_init(SentencePieceNormalizer *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"pure", "units", "replacements", "user", "add_dummy_prefix", "remove_extra_whitespaces",
                             "escape_whitespaces", "treat_whitespace_as_suffix", NULL};
    PyObject *pure, *user;
    Py_buffer units, repl;
    SpNormalizer *m = &self->norm;
    if (self->pure) {
        PyErr_SetString(PyExc_RuntimeError, "SentencePieceNormalizer is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oy*y*O!pppp", kwlist, &pure, &units, &repl, &PyList_Type, &user,
                                     &m->add_dummy_prefix, &m->remove_extra_whitespaces, &m->escape_whitespaces,
                                     &m->treat_whitespace_as_suffix))
        return -1;
    int rc = -1;
    Py_ssize_t nuser = PyList_GET_SIZE(user);
    const uint8_t **keys = PyMem_Malloc((size_t)(nuser ? nuser : 1) * sizeof *keys);
    size_t *lens = PyMem_Malloc((size_t)(nuser ? nuser : 1) * sizeof *lens);
    size_t nunits = (size_t)units.len / 4;
    self->units = malloc(nunits ? nunits * 4 : 1);
    self->repl = malloc((size_t)repl.len + 1);
    if (!keys || !lens || !self->units || !self->repl) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *u = units.buf;
    for (size_t i = 0; i < nunits; i++)
        self->units[i] = (uint32_t)u[4 * i] | (uint32_t)u[4 * i + 1] << 8 | (uint32_t)u[4 * i + 2] << 16 |
                         (uint32_t)u[4 * i + 3] << 24;
    memcpy(self->repl, repl.buf, (size_t)repl.len);
    m->units = self->units;
    m->nunits = nunits;
    m->repl = self->repl;
    m->nrepl = (size_t)repl.len;
    for (Py_ssize_t i = 0; i < nuser; i++) {
        Py_ssize_t len;
        PyObject *piece = PyList_GET_ITEM(user, i);
        if (!PyUnicode_Check(piece) || !(keys[i] = (const uint8_t *)PyUnicode_AsUTF8AndSize(piece, &len))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "SentencePieceNormalizer: user pieces must be str");
            goto done;
        }
        lens[i] = (size_t)len;
    }
    if (sp_normalizer_init(m, keys, lens, (size_t)nuser) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    self->pure = Py_NewRef(pure);
    rc = 0;
done:
    PyBuffer_Release(&units);
    PyBuffer_Release(&repl);
    PyMem_Free(keys);
    PyMem_Free(lens);
    return rc;
}

static PyObject *SentencePieceNormalizer_call(SentencePieceNormalizer *self, PyObject *args, PyObject *kw) {
    PyObject *text;
    if (!self->pure) {
        PyErr_SetString(PyExc_RuntimeError, "SentencePieceNormalizer is not initialised");
        return NULL;
    }
    if (kw || !PyArg_ParseTuple(args, "U", &text))
        return kw ? (PyErr_SetString(PyExc_TypeError, "SentencePieceNormalizer takes one str"), NULL) : NULL;
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    if (find_surrogate(PyUnicode_KIND(text), PyUnicode_DATA(text), n) < n)
        return PyObject_CallOneArg(self->pure, text); /* the pure normalizer's own error */
    SpBytes own = {0};
    size_t len;
    const uint8_t *utf8 = str_utf8(text, &own, &len);
    if (!utf8)
        return PyErr_NoMemory();
    uint8_t *out = NULL;
    size_t out_n = 0;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = sp_normalize(&self->norm, utf8, len, &out, &out_n);
    Py_END_ALLOW_THREADS
    free(own.v);
    if (err == -1)
        return PyErr_NoMemory();
    PyObject *result = err ? NULL : PyUnicode_DecodeUTF8((const char *)out, (Py_ssize_t)out_n, "strict");
    free(out);
    if (!result) {
        /* a bad charsmap value, or replacements that are not UTF-8: the pure path names it */
        PyErr_Clear();
        return PyObject_CallOneArg(self->pure, text);
    }
    return result;
}

static PyMemberDef SentencePieceNormalizer_members[] = {
    {"pure", T_OBJECT_EX, offsetof(SentencePieceNormalizer, pure), READONLY,
     "the pure-Python normalizer this one reproduces"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SentencePieceNormalizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.SentencePieceNormalizer",
    .tp_basicsize = sizeof(SentencePieceNormalizer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)SentencePieceNormalizer_init,
    .tp_dealloc = (destructor)SentencePieceNormalizer_dealloc,
    .tp_call = (ternaryfunc)SentencePieceNormalizer_call,
    .tp_members = SentencePieceNormalizer_members,
    .tp_doc = "The sentencepiece library's normalizer (pymtok.normalizers.SentencePiece).",
};

/* encode_text reads its text this many characters at a time: its buffers hold a part's bytes
 * and what the model has not taken yet, not the whole text's */
#define SP_PART (1u << 16)

static PyObject *SentencePieceModel_encode_text(SentencePieceModel *self, PyObject *const *args, Py_ssize_t nargs) {
    int special;
    if (nargs != 3 || (args[0] != Py_None && !PyObject_TypeCheck(args[0], &SentencePieceNormalizerType)) ||
        !PyUnicode_Check(args[1]) || (special = PyObject_IsTrue(args[2])) < 0) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_text(normalizer: SentencePieceNormalizer | None, text: str, add_special_tokens: bool)");
        return NULL;
    }
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "SentencePieceModel is not initialised");
        return NULL;
    }
    const SpNormalizer *norm = args[0] == Py_None ? NULL : &((SentencePieceNormalizer *)args[0])->norm;
    PyObject *text = args[1];
    size_t n;
    if (encodable_length(text, &n) < 0)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* in: the raw UTF-8 not normalized yet; mid: the normalized text the model has not taken */
    SpBytes in = {0}, mid = {0};
    SpNormState st = {0};
    SpRun run = {0};
    IdBuf ids = {0};
    int err = 0;
    PyObject *list = PyList_New(0);
    if (!list || (special && list_extend(self->ints, list, &self->prefix) < 0))
        goto fail;
    for (size_t a = 0, b; a < n || !a; a = b) {
        b = n - a > SP_PART ? a + SP_PART : n;
        int last = b == n;
        size_t used = 0;
        ids.n = 0;
        Py_BEGIN_ALLOW_THREADS
        err = utf8_of_str(kind, data, a, b, &in);
        if (!err && norm) {
            err = sp_normalize_part(norm, &st, in.v, in.n, last, &used, &mid);
        } else if (!err) {
            err = utf8_of_str(kind, data, a, b, &mid) < 0 ? -1 : 0;
            used = in.n;
        }
        if (!err) {
            if (used < in.n)
                memmove(in.v, in.v + used, in.n - used);
            in.n -= used;
            size_t kept = last || !norm ? mid.n : sp_normalized_kept(norm, mid.v, mid.n);
            err = sp_model_encode_part(&self->model, &run, mid.v, kept, last, &used, &ids);
        }
        if (!err && used) {
            memmove(mid.v, mid.v + used, mid.n - used);
            mid.n -= used;
        }
        Py_END_ALLOW_THREADS
        if (err == -2) {
            /* a bad charsmap value: the pure normalizer raises the error that names it */
            PyObject *r = PyObject_CallOneArg(((SentencePieceNormalizer *)args[0])->pure, text);
            if (r) {
                Py_DECREF(r);
                PyErr_SetString(PyExc_SystemError, "SentencePieceNormalizer: a charsmap value the pure normalizer took");
            }
            goto fail;
        }
        if (err < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        if (list_project(list, ids.n, b, n) < 0 || list_extend(self->ints, list, &ids) < 0)
            goto fail;
        if (last)
            break;
    }
    if (special && list_extend(self->ints, list, &self->suffix) < 0)
        goto fail;
    list_fit(list);
    free(in.v);
    free(mid.v);
    free(ids.v);
    sp_run_free(&run);
    return list;
fail:
    free(in.v);
    free(mid.v);
    free(ids.v);
    sp_run_free(&run);
    Py_XDECREF(list);
    return NULL;
}

static PyObject *work_peak(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return PyLong_FromSize_t(__atomic_exchange_n(&work_peak_bytes, 0, __ATOMIC_RELAXED));
}

static PyObject *regex_refusal(PyObject *module, PyObject *pattern) {
    (void)module;
    if (!PyUnicode_Check(pattern)) {
        PyErr_SetString(PyExc_TypeError, "regex_refusal: the pattern must be str");
        return NULL;
    }
    Regex *re = compile_pattern(pattern);
    if (re) {
        regex_free(re);
        Py_RETURN_NONE;
    }
    if (!PyErr_ExceptionMatches(PyExc_ValueError))
        return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *why = PyObject_Str(value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return why;
}

/* The pieces a pre-tokenizer program cuts a text into, as (start, end) code point spans of the
 * text: what the Encoder's model would be given, for tests. */
static PyObject *pretokenize_spans(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *steps, *text;
    if (!PyArg_ParseTuple(args, "OU", &steps, &text))
        return NULL;
    Step parsed[MAX_STEPS];
    size_t nsteps = 0;
    if (parse_steps(parsed, &nsteps, steps) < 0) {
        steps_free(parsed, nsteps);
        return NULL;
    }
    for (size_t k = 0; k < nsteps; k++)
        if (parsed[k].kind != ST_SPLIT) {
            steps_free(parsed, nsteps);
            PyErr_SetString(PyExc_ValueError, "pretokenize: split steps only (others rebuild the text)");
            return NULL;
        }
    size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    Pieces p = {.buf = n ? PyUnicode_AsUCS4Copy(text) : PyMem_Malloc(sizeof(uint32_t)), .len = n, .cap = n};
    PyObject *out = NULL;
    if (p.buf && !(p.spans.v = malloc(sizeof *p.spans.v)))
        PyErr_NoMemory();
    else if (p.buf) {
        p.spans.v[0] = (Span){0, n, 0};
        p.spans.n = p.spans.cap = 1;
        if (pretokenize(parsed, nsteps, &p) < 0)
            PyErr_NoMemory();
        else if ((out = PyList_New((Py_ssize_t)p.spans.n)))
            for (size_t k = 0; k < p.spans.n; k++) {
                PyObject *span = Py_BuildValue("nn", (Py_ssize_t)p.spans.v[k].start, (Py_ssize_t)p.spans.v[k].end);
                if (!span) {
                    Py_CLEAR(out);
                    break;
                }
                PyList_SET_ITEM(out, (Py_ssize_t)k, span);
            }
    }
    PyMem_Free(p.buf);
    free(p.spare);
    free(p.spans.v);
    free(p.tmp.v);
    steps_free(parsed, nsteps);
    return out;
}

static PyMethodDef module_methods[] = {
    {"regex_refusal", regex_refusal, METH_O,
     "regex_refusal(pattern) -> str | None: why the regex engine refuses an Oniguruma pattern, None if it takes it."},
    {"pretokenize", pretokenize_spans, METH_VARARGS,
     "pretokenize(steps, text) -> list[(start, end)]: the pieces a program of split steps cuts text into."},
    {"grapheme_ends", grapheme_ends, METH_O, "grapheme_ends(text) -> list[int]: the end of each grapheme cluster."},
    {"token_lengths", token_lengths, METH_VARARGS,
     "token_lengths(vocab, bound, kind, affix) -> (first, second, edges): Encoder.set_offsets' lengths (int32 as bytes)\n"
     "of each id below bound, 0 where no token has it, -1 where its tokens differ; vocab an MtokTables, a dict\n"
     "token -> id or a list of pieces. kind 'utf8': UTF-8 bytes and characters; 'byte_level': a byte-level\n"
     "token's bytes and the characters they spell (-1 when not whole), left 0 for a token of other characters;\n"
     "both less the end_of_word_suffix affix; 'wordpiece': bytes, and the bytes after the prefix affix. edges\n"
     "(byte_level, else None): each id's leading | trailing spaces << 16, + 1, of the whole token."},
    {"work_peak", work_peak, METH_NOARGS,
     "work_peak() -> int: the largest encode work buffers (bytes) since the last call, which resets it."},
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
    /* without the key every call brings its own Work, as before it */
    if (!work_key_ok)
        work_key_ok = pthread_key_create(&work_key, thread_work_free) == 0;
    str_add_special_tokens = PyUnicode_InternFromString("add_special_tokens");
    str_split_special_tokens = PyUnicode_InternFromString("split_special_tokens");
    str_meta = PyUnicode_InternFromString("meta");
    str_encode_fast = PyUnicode_InternFromString("_encode_fast");
    if (!str_add_special_tokens || !str_split_special_tokens || !str_meta || !str_encode_fast)
        return NULL;
    for (int i = 0; i < N_NAMES; i++)
        if (!(call_name[i] = PyUnicode_InternFromString(call_name_text[i])))
            return NULL;
    if (PyType_Ready(&EncoderType) < 0 || PyType_Ready(&FastEncodeType) < 0 || PyType_Ready(&NormalizerType) < 0 ||
        PyType_Ready(&DecoderType) < 0 || PyType_Ready(&DecodeStreamType) < 0 ||
        PyType_Ready(&SentencePieceModelType) < 0 || PyType_Ready(&SentencePieceNormalizerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddObjectRef(m, "FastEncode", (PyObject *)&FastEncodeType) < 0 ||
        PyModule_AddObjectRef(m, "Normalizer", (PyObject *)&NormalizerType) < 0 || mtok_tables_register(m) < 0 ||
        PyModule_AddObjectRef(m, "SentencePieceModel", (PyObject *)&SentencePieceModelType) < 0 ||
        PyModule_AddObjectRef(m, "SentencePieceNormalizer", (PyObject *)&SentencePieceNormalizerType) < 0 ||
        PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddObjectRef(m, "DecodeStream", (PyObject *)&DecodeStreamType) < 0 ||
        PyModule_AddIntConstant(m, "DEC_CONTROL", DEC_CONTROL) < 0 || PyModule_AddIntConstant(m, "DEC_UNK", DEC_UNK) < 0 ||
        PyModule_AddIntConstant(m, "DEC_BYTE_PIECE", DEC_BYTE_PIECE) < 0 ||
        PyModule_AddIntConstant(m, "BERT_CLEAN", BERT_CLEAN) < 0 ||
        PyModule_AddIntConstant(m, "BPE_SUFFIX_MAX", BPE_SUFFIX_MAX) < 0 ||
        PyModule_AddIntConstant(m, "BERT_CHINESE", BERT_CHINESE) < 0 ||
        PyModule_AddIntConstant(m, "BERT_STRIP", BERT_STRIP) < 0 ||
        PyModule_AddIntConstant(m, "BERT_LOWER", BERT_LOWER) < 0 ||
        PyModule_AddIntConstant(m, "ADDED_LSTRIP", ADDED_LSTRIP) < 0 ||
        PyModule_AddIntConstant(m, "ADDED_RSTRIP", ADDED_RSTRIP) < 0 ||
        PyModule_AddIntConstant(m, "ADDED_SINGLE_WORD", ADDED_SINGLE_WORD) < 0 ||
        PyModule_AddIntConstant(m, "MAX_STEPS", MAX_STEPS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
