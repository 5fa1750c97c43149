/* Decoding: ids back to text, pymtok.decoders' chain in C.
 *
 * Each step mirrors one decoder of decoders.py on a list of UTF-8 byte strings (HF's
 * decode_chain shape). Token strings come from Python str, so every element is valid UTF-8 and
 * literal replacements on bytes are the same as on characters (UTF-8 is self-synchronizing: a
 * valid pattern only matches at character boundaries). The steps at the head of a chain that
 * edit each token alone (Replace, Strip, ByteLevel's byte mapping) are run once per vocabulary
 * entry when the decoder is built, so decoding a byte-level vocabulary is a table copy per id
 * and one lossy UTF-8 decode.
 */
#include "native.h"

/* Spare bytes after the pool and after every output reservation: a short token is copied
 * as 16 fixed bytes, which compiles to two moves instead of a memcpy call. */
#define SLACK 16

static int tl_reserve(TokList *l, size_t extra) {
    if (l->cap - l->len >= extra + SLACK)
        return 0;
    size_t cap = l->cap ? l->cap : 256;
    while (cap - l->len < extra + SLACK)
        cap *= 2;
    uint8_t *buf = realloc(l->buf, cap);
    if (!buf)
        return -1;
    l->buf = buf;
    l->cap = cap;
    return 0;
}

static int tl_append(TokList *l, const uint8_t *p, size_t n) {
    if (tl_reserve(l, n) < 0)
        return -1;
    if (n) /* p may be an empty list's NULL buffer */
        memcpy(l->buf + l->len, p, n);
    l->len += n;
    return 0;
}

/* End the element being written. */
static int tl_close(TokList *l) {
    if (l->n == l->ncap) {
        size_t ncap = l->ncap ? l->ncap * 2 : 64;
        size_t *end = realloc(l->end, ncap * sizeof *end);
        if (!end)
            return -1;
        l->end = end;
        l->ncap = ncap;
    }
    l->end[l->n++] = l->len;
    return 0;
}

static inline const uint8_t *tl_at(const TokList *l, size_t i, size_t *n) {
    size_t start = i ? l->end[i - 1] : 0;
    *n = l->end[i] - start;
    return l->buf ? l->buf + start : l->buf;
}

static inline void tl_reset(TokList *l) {
    l->len = 0;
    l->n = 0;
}

void toklist_free(TokList *l) {
    free(l->buf);
    free(l->end);
    memset(l, 0, sizeof *l);
}

static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD};

static int utf8_valid(const uint8_t *s, size_t n) {
    for (size_t i = 0, sub; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_sequence(s + i, n - i, &sub);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

/* Append s as valid UTF-8, each maximal invalid subpart one U+FFFD. */
static int append_lossy(TokList *out, const uint8_t *s, size_t n) {
    if (tl_reserve(out, n * 3) < 0)
        return -1;
    uint8_t *o = out->buf + out->len;
    for (size_t i = 0, sub; i < n;) {
        if (s[i] < 0x80) {
            *o++ = s[i++];
            continue;
        }
        size_t k = utf8_sequence(s + i, n - i, &sub);
        if (k) {
            memcpy(o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(o, REPLACEMENT, 3);
            o += 3;
            i += sub;
        }
    }
    out->len = (size_t)(o - out->buf);
    return 0;
}

/* Append s with every leftmost non-overlapping pat (non-empty) replaced by rep. */
static int append_replaced(TokList *out, const uint8_t *s, size_t n, const uint8_t *pat, size_t np,
                           const uint8_t *rep, size_t nr) {
    if (!n)
        return tl_reserve(out, 0);
    size_t i = 0;
    while (i + np <= n) {
        const uint8_t *hit = memchr(s + i, pat[0], n - i - np + 1);
        if (!hit)
            break;
        size_t at = (size_t)(hit - s);
        if (memcmp(hit, pat, np) != 0) {
            if (tl_append(out, s + i, at + 1 - i) < 0)
                return -1;
            i = at + 1;
            continue;
        }
        if (tl_append(out, s + i, at - i) < 0 || tl_append(out, rep, nr) < 0)
            return -1;
        i = at + np;
    }
    return tl_append(out, s + i, n - i);
}

/* HF's cleanup of WordPiece and CTC output (decoders._HF_CLEANUP), in its order. */
static const char *const CLEANUP[][2] = {
    {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
    {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

/* Append s after the cleanup; sc is scratch. */
static int append_cleaned(TokList *out, const uint8_t *s, size_t n, TokList sc[2]) {
    if (!memchr(s, ' ', n)) /* every pattern starts with a space and none makes a new one */
        return tl_append(out, s, n);
    TokList *a = &sc[0], *b = &sc[1];
    tl_reset(a);
    int rc = tl_append(a, s, n);
    for (size_t r = 0; rc == 0 && r < sizeof CLEANUP / sizeof *CLEANUP; r++) {
        tl_reset(b);
        const char *pat = CLEANUP[r][0], *rep = CLEANUP[r][1];
        rc = append_replaced(b, a->buf, a->len, (const uint8_t *)pat, strlen(pat), (const uint8_t *)rep, strlen(rep));
        TokList *t = a;
        a = b;
        b = t;
    }
    return rc < 0 ? -1 : tl_append(out, a->buf, a->len);
}

/* ByteLevel's per-token part: the token's characters as GPT-2 bytes, or its UTF-8 when any
 * character is outside the alphabet. */
static int append_gpt2_bytes(TokList *out, const uint8_t *s, size_t n) {
    if (tl_reserve(out, n) < 0)
        return -1;
    uint8_t *o = out->buf + out->len;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += utf8_get(s + i, n - i, &cp);
        int b = gpt2_byte(cp);
        if (b < 0)
            return tl_append(out, s, n);
        *o++ = (uint8_t)b;
    }
    out->len = (size_t)(o - out->buf);
    return 0;
}

static int hex_digit(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* HF's ByteFallback test: exactly "<0x" two hex digits ">" (u8::from_str_radix also takes "+F"). */
static int fallback_byte(const uint8_t *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (size_t k = s[3] == '+' ? 4 : 3; k < 5; k++) {
        int d = hex_digit(s[k]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* End an element, unless the step writes one element for all (then the caller ends it). */
static inline int tl_end(TokList *l, int one) {
    return one ? 0 : tl_close(l);
}

/* A run of fallback bytes: one element if it is valid UTF-8, else a U+FFFD element per byte. */
static int flush_run(TokList *out, const uint8_t *run, size_t n, int one) {
    if (!n)
        return 0;
    if (utf8_valid(run, n))
        return tl_append(out, run, n) < 0 ? -1 : tl_end(out, one);
    for (size_t k = 0; k < n; k++)
        if (tl_append(out, REPLACEMENT, 3) < 0 || tl_end(out, one) < 0)
            return -1;
    return 0;
}

static size_t count_leading(const uint8_t *s, size_t n, const uint8_t *c, size_t nc, size_t max) {
    size_t k = 0;
    while (k < max && (k + 1) * nc <= n && memcmp(s + k * nc, c, nc) == 0)
        k++;
    return k;
}

static size_t count_trailing(const uint8_t *s, size_t n, const uint8_t *c, size_t nc, size_t max) {
    size_t k = 0;
    while (k < max && (k + 1) * nc <= n && memcmp(s + n - (k + 1) * nc, c, nc) == 0)
        k++;
    return k;
}

static int apply_step_in(const DecStep *st, const TokList *in, TokList *out, TokList *tmp, TokList sc[3], int one) {
    static const uint8_t space = ' ';
    tl_reset(out);
    tl_reset(tmp);
    size_t n;
    const uint8_t *s;
    switch (st->kind) {
    case DEC_FUSE:
    case DEC_JOIN_LOSSY:
    case DEC_BYTE_LEVEL:
        for (size_t i = 0; i < in->n; i++) {
            s = tl_at(in, i, &n);
            int rc = st->kind == DEC_FUSE ? tl_append(out, s, n)
                     : st->kind == DEC_BYTE_LEVEL ? append_gpt2_bytes(tmp, s, n) : tl_append(tmp, s, n);
            if (rc < 0)
                return -1;
        }
        if (st->kind != DEC_FUSE && append_lossy(out, tmp->buf, tmp->len) < 0)
            return -1;
        tl_reset(tmp);
        return tl_close(out);
    case DEC_BYTE_FALLBACK: {
        for (size_t i = 0; i < in->n; i++) {
            s = tl_at(in, i, &n);
            int b = fallback_byte(s, n);
            if (b >= 0) {
                uint8_t byte = (uint8_t)b;
                if (tl_append(tmp, &byte, 1) < 0)
                    return -1;
                continue;
            }
            if (flush_run(out, tmp->buf, tmp->len, one) < 0 || tl_append(out, s, n) < 0 || tl_end(out, one) < 0)
                return -1;
            tl_reset(tmp);
        }
        int rc = flush_run(out, tmp->buf, tmp->len, one);
        tl_reset(tmp);
        return rc < 0 || !one ? rc : tl_close(out);
    }
    default:
        break;
    }
    for (size_t i = 0; i < in->n; i++) {
        s = tl_at(in, i, &n);
        int rc = 0;
        switch (st->kind) {
        case DEC_REPLACE:
            /* HF never matches inside an empty token */
            rc = n ? append_replaced(out, s, n, st->a, st->na, st->b, st->nb) : 0;
            break;
        case DEC_STRIP: {
            size_t lead = count_leading(s, n, st->a, st->na, st->start) * st->na;
            size_t trail = count_trailing(s, n, st->a, st->na, st->stop) * st->na;
            rc = lead + trail < n ? tl_append(out, s + lead, n - lead - trail) : 0;
            break;
        }
        case DEC_METASPACE:
            rc = append_replaced(out, s, n, st->a, st->na, &space, i == 0 && st->flag ? 0 : 1);
            break;
        case DEC_BPE:
            rc = append_replaced(out, s, n, st->a, st->na, &space, i + 1 == in->n ? 0 : 1);
            break;
        case DEC_WORDPIECE: {
            tl_reset(tmp);
            if (i > 0) {
                if (!st->na || (n >= st->na && memcmp(s, st->a, st->na) == 0))
                    s += st->na, n -= st->na;
                else if (tl_append(tmp, &space, 1) < 0)
                    return -1;
            }
            if (tl_append(tmp, s, n) < 0)
                return -1;
            rc = st->flag ? append_cleaned(out, tmp->buf, tmp->len, sc) : tl_append(out, tmp->buf, tmp->len);
            break;
        }
        case DEC_CTC: {
            size_t np;
            const uint8_t *prev = i ? tl_at(in, i - 1, &np) : NULL;
            if (prev && np == n && (!n || memcmp(prev, s, n) == 0))
                continue; /* repeats collapse */
            size_t mark = out->len;
            tl_reset(tmp);
            if (append_replaced(tmp, s, n, st->a, st->na, NULL, 0) < 0)
                return -1;
            if (st->flag) {
                TokList *clean = &sc[2];
                tl_reset(clean);
                rc = append_cleaned(clean, tmp->buf, tmp->len, sc);
                if (rc == 0)
                    rc = append_replaced(out, clean->buf, clean->len, st->b, st->nb, &space, 1);
            } else {
                rc = tl_append(out, tmp->buf, tmp->len);
            }
            if (rc == 0 && out->len == mark)
                continue; /* an empty token is dropped */
            break;
        }
        default:
            return -1;
        }
        if (rc < 0 || tl_end(out, one) < 0)
            return -1;
    }
    return one ? tl_close(out) : 0;
}

/* One step from list in to list out, all in one element when one (a Fuse or the final join
 * follows); tmp is scratch. */
static int apply_step(const DecStep *st, const TokList *in, TokList *out, TokList *tmp, int one) {
    TokList sc[3] = {{0}, {0}, {0}};
    int rc = apply_step_in(st, in, out, tmp, sc, one);
    for (int k = 0; k < 3; k++)
        toklist_free(&sc[k]);
    return rc;
}

int decoder_fold(Decoder *d, DecStep *steps, size_t nsteps) {
    size_t k = 0;
    while (k < nsteps && (steps[k].kind == DEC_REPLACE || steps[k].kind == DEC_STRIP))
        k++;
    int byte_level = k < nsteps && steps[k].kind == DEC_BYTE_LEVEL;
    if (k || byte_level) {
        TokList a = {0}, b = {0}, tmp = {0}, pool = {0};
        size_t *off = malloc((d->n + 1) * sizeof *off);
        int rc = off ? 0 : -1;
        for (size_t id = 0; rc == 0 && id < d->n; id++) {
            off[id] = pool.len;
            if (!(d->flags[id] & DEC_PRESENT))
                continue;
            const uint8_t *s = d->pool + d->off[id];
            size_t n = d->off[id + 1] - d->off[id];
            if (k) { /* a ByteLevel decoder alone, the common case, maps the token as it is */
                tl_reset(&a);
                rc = tl_append(&a, s, n);
                if (rc == 0)
                    rc = tl_close(&a);
                for (size_t j = 0; rc == 0 && j < k; j++) {
                    rc = apply_step(&steps[j], &a, &b, &tmp, 0);
                    TokList t = a;
                    a = b;
                    b = t;
                }
                n = 0;
                s = a.n ? tl_at(&a, 0, &n) : a.buf;
            }
            if (rc == 0)
                rc = byte_level ? append_gpt2_bytes(&pool, s, n) : tl_append(&pool, s, n);
        }
        if (rc == 0) {
            off[d->n] = pool.len;
            rc = tl_reserve(&pool, 0); /* the SLACK after the last token */
            if (rc == 0)
                memset(pool.buf + pool.len, 0, SLACK);
        }
        toklist_free(&a);
        toklist_free(&b);
        toklist_free(&tmp);
        if (rc < 0) {
            free(off);
            toklist_free(&pool);
            for (size_t j = 0; j < nsteps; j++)
                free(steps[j].a), free(steps[j].b);
            free(steps);
            return -1;
        }
        free(d->pool);
        free(d->off);
        d->pool = pool.buf;
        d->off = off;
        for (size_t j = 0; j < k; j++)
            free(steps[j].a), free(steps[j].b);
        if (byte_level)
            steps[k].kind = DEC_JOIN_LOSSY;
        memmove(steps, steps + k, (nsteps - k) * sizeof *steps);
        nsteps -= k;
    }
    d->steps = steps;
    d->nsteps = nsteps;
    return 0;
}

/* Bytes to text one character at a time, each byte that starts no well-formed character a
 * U+FFFD (decoders._sentencepiece_bytes: the library's own recovery, unlike lossy UTF-8). */
static int append_sentencepiece_bytes(TokList *out, const uint8_t *s, size_t n) {
    if (tl_reserve(out, n * 3) < 0)
        return -1;
    uint8_t *o = out->buf + out->len;
    for (size_t i = 0, sub; i < n;) {
        size_t k = utf8_sequence(s + i, n - i, &sub);
        if (k) {
            memcpy(o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(o, REPLACEMENT, 3);
            o += 3;
            i++;
        }
    }
    out->len = (size_t)(o - out->buf);
    return 0;
}

/* SentencePieceProcessor::Decode, as decoders.SentencePiece: control pieces vanish, the unknown
 * piece becomes its surface, byte pieces gather into runs, and the leading metaspace of the
 * first piece that puts out text is dropped. */
static int sentencepiece_run(const Decoder *d, const DecStep *st, const uint32_t *ids, size_t n, int skip_special,
                             TokList *out, TokList *run) {
    static const uint8_t metaspace[3] = {0xE2, 0x96, 0x81}, space = ' ';
    const uint8_t drop = (uint8_t)(skip_special ? DEC_SPECIAL : 0);
    int bos_ws = 1, bos_ws_seen = 0, strip = st->flag & DEC_SP_STRIP, remove_extra = st->flag & DEC_SP_REMOVE_EXTRA;
    tl_reset(out);
    tl_reset(run);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= d->n || !(d->flags[id] & DEC_PRESENT) || (d->flags[id] & drop))
            continue;
        uint8_t f = d->flags[id];
        const uint8_t *s = d->pool + d->off[id];
        size_t len = d->off[id + 1] - d->off[id];
        if (f & DEC_BYTE_PIECE) { /* "<0xXX>", checked by native.py */
            uint8_t byte = (uint8_t)(hex_digit(s[3]) * 16 + hex_digit(s[4]));
            if (tl_append(run, &byte, 1) < 0)
                return -1;
            continue;
        }
        if (run->len) {
            if (append_sentencepiece_bytes(out, run->buf, run->len) < 0)
                return -1;
            tl_reset(run);
        }
        if (bos_ws_seen || out->len)
            bos_ws = 0;
        bos_ws_seen = 0;
        if (f & DEC_CONTROL)
            continue;
        if (f & DEC_UNK) {
            if (tl_append(out, st->a, st->na) < 0)
                return -1;
            continue;
        }
        if (bos_ws && strip && len >= 3 && memcmp(s, metaspace, 3) == 0) {
            s += 3, len -= 3;
            bos_ws_seen = !remove_extra;
        }
        if (append_replaced(out, s, len, metaspace, 3, &space, 1) < 0)
            return -1;
    }
    if (run->len && append_sentencepiece_bytes(out, run->buf, run->len) < 0)
        return -1;
    return tl_close(out);
}

/* The tokens of ids, one element each, or all in one element when join. */
static int gather(const Decoder *d, const uint32_t *ids, size_t n, int skip_special, int join, TokList *out) {
    const uint8_t drop = (uint8_t)(skip_special ? DEC_SPECIAL : 0);
    tl_reset(out);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= d->n || !(d->flags[id] & DEC_PRESENT) || (d->flags[id] & drop))
            continue; /* HF skips ids it does not know */
        size_t start = d->off[id], len = d->off[id + 1] - start;
        if (tl_reserve(out, len) < 0)
            return -1;
        if (len <= SLACK)
            memcpy(out->buf + out->len, d->pool + start, SLACK); /* both sides have SLACK to spare */
        else
            memcpy(out->buf + out->len, d->pool + start, len);
        out->len += len;
        if (!join && tl_close(out) < 0)
            return -1;
    }
    return join ? tl_close(out) : 0;
}

int decoder_run(const Decoder *d, const uint32_t *ids, size_t n, int skip_special, TokList *out, TokList *tmp) {
    if (d->nsteps && d->steps[0].kind == DEC_SENTENCEPIECE)
        return sentencepiece_run(d, &d->steps[0], ids, n, skip_special, out, tmp);
    int first = d->nsteps ? d->steps[0].kind : -1;
    int join = first == DEC_FUSE || first == DEC_JOIN_LOSSY || (first < 0 && !d->space_join);
    TokList work = {0};
    TokList *cur = out, *spare = &work;
    int rc = gather(d, ids, n, skip_special, join, cur);
    for (size_t k = 0; rc == 0 && k < d->nsteps; k++) {
        const DecStep *st = &d->steps[k];
        /* already one element; a last lossy step is left to the caller's "replace" decode */
        if (st->kind == DEC_FUSE && cur->n == 1)
            continue;
        if (k == 0 && join && d->nsteps == 1)
            continue;
        /* the elements' bounds no longer matter when a Fuse or the final join comes next */
        int one = !d->space_join && (k + 1 == d->nsteps || d->steps[k + 1].kind == DEC_FUSE);
        rc = apply_step(st, cur, spare, tmp, one);
        TokList *t = cur;
        cur = spare;
        spare = t;
    }
    if (rc == 0 && cur->n != 1) {
        /* the elements joined, with spaces when there is no decoder (transformers' join) */
        tl_reset(spare);
        for (size_t i = 0; rc == 0 && i < cur->n; i++) {
            size_t len;
            const uint8_t *s = tl_at(cur, i, &len);
            if (i && d->space_join)
                rc = tl_append(spare, (const uint8_t *)" ", 1);
            if (rc == 0)
                rc = tl_append(spare, s, len);
        }
        if (rc == 0)
            rc = tl_close(spare);
        cur = spare;
    }
    if (cur != out) {
        TokList t = *out;
        *out = work;
        work = t;
    }
    toklist_free(&work);
    return rc;
}

void decoder_free(Decoder *d) {
    for (size_t j = 0; j < d->nsteps; j++)
        free(d->steps[j].a), free(d->steps[j].b);
    free(d->steps);
    free(d->pool);
    free(d->off);
    free(d->flags);
    memset(d, 0, sizeof *d);
}

/* ids to valid UTF-8 in out (decoder_run leaves a last lossy step to its caller). */
static int decode_valid(const Decoder *d, const uint32_t *ids, size_t n, int skip, TokList *out, TokList *tmp,
                        TokList *spare) {
    if (decoder_run(d, ids, n, skip, out, tmp) < 0)
        return -1;
    if (utf8_valid(out->buf, out->len))
        return 0;
    tl_reset(spare);
    if (append_lossy(spare, out->buf, out->len) < 0)
        return -1;
    TokList t = *out;
    *out = *spare;
    *spare = t;
    return 0;
}

static int ends_with_replacement(const TokList *t) {
    return t->len >= 3 && memcmp(t->buf + t->len - 3, REPLACEMENT, 3) == 0;
}

/* Tokenizer.DecodeStream.step, on bytes: a UTF-8 prefix test is the same as on characters. */
int decode_stream_step(const Decoder *d, DecodeStreamState *s, uint32_t id, int skip, size_t *start) {
    if (!s->prefix.len && s->n) {
        if (decode_valid(d, s->ids, s->n, skip, &s->text, &s->tmp, &s->spare) < 0)
            return -1;
        if (!ends_with_replacement(&s->text)) {
            TokList t = s->prefix;
            s->prefix = s->text;
            s->text = t;
            s->prefix_index = s->n;
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        uint32_t *ids = realloc(s->ids, cap * sizeof *ids);
        if (!ids)
            return -1;
        s->ids = ids;
        s->cap = cap;
    }
    s->ids[s->n++] = id;
    if (decode_valid(d, s->ids, s->n, skip, &s->text, &s->tmp, &s->spare) < 0)
        return -1;
    size_t np = s->prefix.len;
    if (!(s->text.len > np && (!np || memcmp(s->text.buf, s->prefix.buf, np) == 0)))
        return s->text.len <= np || ends_with_replacement(&s->text) ? STREAM_NONE : STREAM_BAD_PREFIX;
    if (ends_with_replacement(&s->text))
        return STREAM_NONE;
    size_t new_index = s->n - s->prefix_index;
    memmove(s->ids, s->ids + s->prefix_index, (s->n - s->prefix_index) * sizeof *s->ids);
    s->n -= s->prefix_index;
    s->prefix_index = new_index;
    *start = np;
    /* the new prefix goes to s->prefix; s->text keeps the whole text for the caller */
    return decode_valid(d, s->ids, s->n, skip, &s->prefix, &s->tmp, &s->spare) < 0 ? -1 : STREAM_TEXT;
}

void decode_stream_free(DecodeStreamState *s) {
    free(s->ids);
    toklist_free(&s->prefix);
    toklist_free(&s->text);
    toklist_free(&s->tmp);
    toklist_free(&s->spare);
    memset(s, 0, sizeof *s);
}
