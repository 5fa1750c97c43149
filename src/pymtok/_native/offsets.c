/* Token offsets (transformers' return_offsets_mapping) from the ids a model gave one piece.
 *
 * The BPE and WordPiece models emit ids only; which bytes of the piece each token covers
 * follows from the tokens' byte lengths, as their bytes concatenated are the piece's. A token
 * covering part of a character's bytes covers that character, as HF converts its byte offsets
 * to characters. The lengths are measured here (offsets_measure, on the vocabulary native.py
 * hands token_lengths), which native.py adjusts and sets (OffsetLengths); an id whose length is
 * not known for certain (unknown and byte-fallback tokens, an id spelled two ways) makes the
 * text go back to the pure path, which knows where each token came from, but for a Unigram
 * model, whose Viterbi path is run again to tell each token's bytes (unigram_piece_ranges).
 * A WordPiece or Unigram piece's spans, once placed, are kept beside its cache entry
 * (cache_spans_put) and read with its ids on the next call: such a piece's lengths are two
 * tables' (WordPiece), a walk of its UTF-8 or that model run. BPE's are placed on every call from
 * their lengths, which stay in the nearer caches: kept spans cost its calls more in misses than
 * placing them (a text's tokens in turns with other calls: 5-10% of a call with offsets);
 * untrimmed, a segment's tokens one after the other by their steps (spans_stream).
 */
#include "native.h"

/* HF's is_whitespace test in ByteLevel's process_offsets, on a token string's characters: the
 * GPT-2 character of the space byte, or a Rust whitespace character. */
int offsets_trimmed_char(uint32_t c) { return c == 0x120 || rust_white_space(c); }

/* ByteLevel's process_offsets on the span of the token of the given index, lead and trail
 * characters of whose string it trims: selects, not branches, as half of all tokens start with
 * a space, which no predictor guesses */
static inline void trim_span(int64_t *start, int64_t *end, size_t lead, size_t trail, int trim, size_t index) {
    if (trim == OFF_TRIM_PREFIX_SPACE)
        lead -= (size_t)(lead == 1) & ((size_t)(index == 0) | (size_t)(*start == 0));
    int64_t s = *start, e = *end, moved = s + (int64_t)lead;
    s = lead ? (moved < e ? moved : e) : s;
    *start = s;
    /* trailing spaces are rarer (runs of them): a branch the predictor gets */
    if (__builtin_expect(trail != 0, 0) && e >= (int64_t)trail) {
        int64_t cut = e - (int64_t)trail;
        *end = cut > s ? cut : s;
    }
}

static inline int push(IdBuf *offs, int64_t start, int64_t end, size_t lead, size_t trail, int trim, size_t index) {
    if (trim != OFF_NO_TRIM)
        trim_span(&start, &end, lead, trail, trim, index);
    if (start > INT32_MAX || end > INT32_MAX)
        return -2;
    if (offs->cap - offs->n < 2 && ids_grow(offs, 2) < 0)
        return -1;
    offs->v[offs->n++] = (int32_t)start;
    offs->v[offs->n++] = (int32_t)end;
    return 0;
}

int offsets_push(IdBuf *offs, int64_t start, int64_t end, size_t lead, size_t trail, int trim, size_t index) {
    return push(offs, start, end, lead, trail, trim, index);
}

/* The leading and trailing characters of s[0..n) offsets_trimmed_char counts (an added token's
 * text, a char-level token). */
void offsets_spaces(const uint32_t *s, size_t n, size_t *lead, size_t *trail) {
    size_t a = 0, b = n;
    while (a < n && offsets_trimmed_char(s[a]))
        a++;
    while (b > 0 && offsets_trimmed_char(s[b - 1]))
        b--;
    *lead = a;
    *trail = n - b;
}

static inline void length_put(int32_t *v, size_t len) {
    int32_t n = len > INT32_MAX ? -1 : (int32_t)len;
    *v = *v == 0 || *v == n ? n : -1;
}

/* The characters of UTF-8 s[0..n) when it is well-formed (as Python's strict decoder takes it),
 * else -1: a byte-level token holding part of a character. */
static int64_t utf8_chars(const uint8_t *s, size_t n) {
    int64_t chars = 0;
    for (size_t i = 0, sub, k; i < n; i += k, chars++)
        if (!(k = utf8_sequence(s + i, n - i, &sub)))
            return -1;
    return chars;
}

void offsets_measure(const TokenMeasure *m, const uint8_t *s, size_t n, int64_t id) {
    if (id < 0 || (uint64_t)id >= m->bound)
        return;
    if (m->edges) {
        size_t lead = 0, trail = 0;
        while (lead < n && s[lead] == ' ')
            lead++;
        while (trail < n && s[n - 1 - trail] == ' ')
            trail++;
        /* the token's string's, suffix and all: HF trims the string */
        length_put(&m->edges[id], lead < 0xFFFF && trail < 0x7FFF ? (lead | trail << 16) + 1 : (size_t)-1);
    }
    if (m->kind == LENGTHS_WORDPIECE) {
        length_put(&m->first[id], n);
        if (n >= m->naffix && bytes_eq(s, m->affix, m->naffix))
            length_put(&m->second[id], n - m->naffix);
        return;
    }
    if (m->naffix && n >= m->naffix && bytes_eq(s + n - m->naffix, m->affix, m->naffix))
        n -= m->naffix;
    length_put(&m->first[id], n);
    if (m->kind == LENGTHS_BYTE_LEVEL) {
        int64_t chars = utf8_chars(s, n);
        if (chars >= 0) {
            length_put(&m->second[id], (size_t)chars);
        } else {
            /* part of a character: the characters it starts, and whether it continues one */
            size_t starts = 0;
            for (size_t i = 0; i < n; i++)
                starts += (s[i] & 0xC0) != 0x80;
            int32_t code = offsets_partial(starts, n && (s[0] & 0xC0) == 0x80);
            m->second[id] = m->second[id] == 0 || m->second[id] == code ? code : -1;
        }
        return;
    }
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += (s[i] & 0xC0) != 0x80;
    length_put(&m->second[id], chars);
}

int offsets_lengths_init(OffsetLengths *L, const int32_t *chars) {
    const int32_t *full[3] = {L->first, L->cont, chars};
    uint8_t **compact[3] = {&L->first8, &L->cont8, &L->chars8};
    for (int t = 0; t < 3; t++) {
        if (!full[t])
            continue;
        uint8_t *v = malloc(L->n ? L->n : 1);
        if (!v)
            return -1;
        /* 255: beyond the table, in the full one; characters have none, the token is taken for
         * unknown there, as where its bytes are not known */
        for (size_t i = 0; i < L->n; i++)
            v[i] = full[t][i] <= 0 || (t == 2 && (full[t][i] >= 255 || L->first[i] < 0)) ? 0
                   : full[t][i] >= 255                                                  ? 255
                                                                                        : (uint8_t)full[t][i];
        *compact[t] = v;
    }
    if (!chars || !L->tiles)
        return 0;
    if (!(L->steps8 = malloc(L->n ? L->n : 1)))
        return -1;
    for (size_t i = 0; i < L->n; i++) {
        int32_t c = chars[i];
        size_t starts = c >= 0 ? (size_t)c : (size_t)(-c - 2) >> 1;
        L->steps8[i] = L->first[i] <= 0 || c == 0 || c == -1 || starts > OFF_STEP_STARTS ? 0
                       : c > 0 ? (uint8_t)c
                               : (uint8_t)(starts | ((size_t)(-c - 2) & 1) << 7);
    }
    return 0;
}

int offsets_edges_init(OffsetLengths *L, const int32_t *edges) {
    if (!(L->edges = malloc((L->n ? L->n : 1) * sizeof *L->edges)))
        return -1;
    for (size_t i = 0; i < L->n; i++) {
        uint32_t e = (uint32_t)(edges[i] - 1), lead = e & 0xFFFF, trail = e >> 16;
        L->edges[i] = edges[i] <= 0 || lead > 0xFF || trail > 0xFE ? OFF_EDGES_UNKNOWN : (uint16_t)(lead | trail << 8);
    }
    if (!L->chars8)
        return 0;
    if (!(L->trims = malloc((L->n ? L->n : 1) * sizeof *L->trims)))
        return -1;
    for (size_t i = 0; i < L->n; i++) {
        /* trim_span on the span (0, chars) of the token's characters: no end below its trail */
        int64_t start = 0, end = L->chars8[i];
        uint16_t e = L->edges[i];
        if (e != OFF_EDGES_UNKNOWN)
            trim_span(&start, &end, e & 0xFF, e >> 8, OFF_TRIM, 1);
        L->trims[i] = e == OFF_EDGES_UNKNOWN ? 0 : (uint32_t)end << 16 | (uint32_t)start << 8 | L->chars8[i];
    }
    return 0;
}

void offsets_lengths_free(OffsetLengths *L) {
    free(L->edges);
    free(L->trims);
    free(L->first);
    free(L->cont);
    free(L->first8);
    free(L->cont8);
    free(L->chars8);
    free(L->steps8);
    *L = (OffsetLengths){0};
}

/* a macro: GCC takes a function holding nothing but a prefetch for pure, and drops its calls */
#define LENGTH_PREFETCH(L, id)                                                                       \
    do {                                                                                             \
        if ((id) >= 0 && (size_t)(id) < (L)->n)                                                      \
            __builtin_prefetch(&(L)->first8[id]);                                                    \
    } while (0)

/* The caller's character a piece's character i comes from: align[i] (a normalizer's), else i. */
static int64_t from(int64_t origin, const uint32_t *align, size_t i) { return origin + (int64_t)(align ? align[i] : i); }

/* The characters ByteLevel's trimming leaves out of a token covering buf[first..last): for a
 * byte-level model the token's string holds a GPT-2 space for each space byte, and no other
 * character it trims, a space being one whole character, counted where the token starts (ends)
 * on a character's first (after its last) byte; else its string's spaces. */
static inline void edge_spaces(const OffsetLengths *L, const uint32_t *buf, size_t first, size_t last,
                               int start_aligned, int end_aligned, size_t *lead, size_t *trail) {
    *lead = *trail = 0;
    if (!L->byte_level) {
        offsets_spaces(buf + first, last - first, lead, trail);
        return;
    }
    /* a space at either end without branches (half of all tokens start with one, which no
     * predictor guesses), then runs of them, which are rare */
    size_t n = last - first, two = n > 1;
    size_t a = (size_t)start_aligned & (size_t)(buf[first] == ' ');
    size_t z = (size_t)end_aligned & (size_t)(buf[last - 1] == ' ');
    if (a & two & (size_t)(buf[first + two] == ' '))
        while (a < n && buf[first + a] == ' ')
            a++;
    if (z & two & (size_t)(buf[last - 1 - two] == ' '))
        while (z < n && buf[last - 1 - z] == ' ')
            z++;
    *lead = a;
    *trail = z;
}

int piece_offsets(const OffsetLengths *L, const uint32_t *cps, size_t n, int64_t origin, const uint32_t *align,
                  const int32_t *ids, size_t nids, const int32_t *ranges, IdBuf *offs, size_t *used) {
    *used = 0;
    if (!n)
        return 0;
    size_t ci = 0, cb = 0, cl = utf8_width(cps[0]), b = 0, total = utf8_size(cps, n), k = 0;
    /* one byte a character: a token's bytes are its characters */
    int ascii = total == n;
    for (; ranges ? k < nids : b < total; k++) {
        size_t b0 = b, b1;
        if (ranges) {
            /* the bytes the model says; a byte token repeats its run's, whose offsets it takes */
            if (k && ranges[2 * k] == ranges[2 * k - 2] && ranges[2 * k + 1] == ranges[2 * k - 1]) {
                int err = push(offs, offs->v[offs->n - 2], offs->v[offs->n - 1], 0, 0, OFF_NO_TRIM, 0);
                if (err)
                    return err;
                continue;
            }
            b0 = (size_t)ranges[2 * k];
            b1 = (size_t)ranges[2 * k + 1];
            if (b0 < b || b1 <= b0 || b1 > total)
                return -2;
        } else {
            if (k == nids)
                return -2;
            /* the next pieces' ids follow this piece's: their lengths' misses overlap this work */
            if (k + 16 < nids)
                LENGTH_PREFETCH(L, ids[k + 16]);
            int32_t len = token_length(L, k && L->cont, ids[k]);
            if (len <= 0 || b + (size_t)len > total)
                return -2;
            b1 = b + (size_t)len;
        }
        size_t start, end;
        if (ascii) {
            start = b0;
            end = b1;
        } else {
            while (cb + cl <= b0) {
                cb += cl;
                cl = utf8_width(cps[++ci]);
            }
            start = ci;
            while (cb + cl < b1) {
                cb += cl;
                cl = utf8_width(cps[++ci]);
            }
            end = ci + 1;
        }
        int err = push(offs, from(origin, align, start), from(origin, align, end - 1) + 1, 0, 0, OFF_NO_TRIM, 0);
        if (err)
            return err;
        b = b1;
    }
    if (b != total)
        return -2;
    *used = k;
    return 0;
}

/* A BPE token's span trimmed as `trim` says: by its string's spaces, one look-up where they are
 * known (the text's characters are its string's, trimming being asked for), else edge_spaces. */
static inline void token_trim(const OffsetLengths *L, const uint32_t *buf, size_t first, size_t last,
                              int start_aligned, int end_aligned, int trim, size_t index, int32_t id,
                              int64_t *start, int64_t *end) {
    size_t lead, trail;
    uint16_t e = L->edges && (uint32_t)id < L->n ? L->edges[id] : OFF_EDGES_UNKNOWN;
    if (e != OFF_EDGES_UNKNOWN) {
        lead = e & 0xFF;
        trail = e >> 8;
    } else {
        edge_spaces(L, buf, first, last, start_aligned, end_aligned, &lead, &trail);
    }
    trim_span(start, end, lead, trail, trim, index);
}

/* The span of the token covering buf[first..last) into o: within int32, as the caller's text is
 * (encode_offsets takes no longer one), the spans being of its characters. */
static inline __attribute__((always_inline)) void put_span(const OffsetLengths *L, const uint32_t *buf, size_t first,
                                                           size_t last, int64_t origin, const uint32_t *align,
                                                           int start_aligned, int end_aligned, int trim, size_t index,
                                                           int32_t id, int32_t *o) {
    int64_t start = origin + (int64_t)(align ? align[first] : first);
    int64_t end = origin + (int64_t)(align ? align[last - 1] : last - 1) + 1;
    if (trim != OFF_NO_TRIM)
        token_trim(L, buf, first, last, start_aligned, end_aligned, trim, index, id, &start, &end);
    o[0] = (int32_t)start;
    o[1] = (int32_t)end;
}

/* A whole-character token's trimmed span read by id (t, from L->trims) at the caller's
 * character at into o[0..2): 1 when placed, 0 where t does not know its spaces or for
 * add_prefix_space's exception (a first token, one at the text's start). */
static inline int trimmed_by_id(uint32_t t, int trim, int64_t at, size_t index, int32_t *o) {
    if (!t || (trim == OFF_TRIM_PREFIX_SPACE && (!at || !index)))
        return 0;
    o[0] = (int32_t)(at + (t >> 8 & 0xFF));
    o[1] = (int32_t)(at + (t >> 16));
    return 1;
}

/* The spans of the m tokens a BPE model gave the piece buf[c..c + n) (m > 0), into o: a cursor at
 * character ci, of which `into` bytes are covered. A token of whole characters where the cursor
 * is at a character's start (most tokens) moves it by its length in characters, without looking
 * at them; another (a byte token, part of a character) by its bytes, a character at a time. When
 * the model's tokens tile the piece, the last takes what the others leave: a piece of one token
 * (most) needs no length. nchars is the ids chars8 holds, 0 without it. */
static inline __attribute__((always_inline)) int word_offsets(const OffsetLengths *L, size_t nchars,
                                                              const uint32_t *buf, size_t c, size_t n, int64_t origin,
                                                              const uint32_t *align, const int32_t *ids, size_t m,
                                                              int trim, size_t index, int32_t *o) {
    size_t ci = c, stop = c + n, into = 0, placed = L->tiles ? m - 1 : m;
    for (size_t k = 0; k < placed; k++) {
        size_t first = ci;
        int start_aligned = !into;
        size_t chars = !into && (uint32_t)ids[k] < nchars ? L->chars8[ids[k]] : 0;
        if (chars) {
            if (chars > stop - ci)
                return -2;
            ci += chars;
            /* trimmed as spans_body's whole-character tokens: by id where it can */
            if (!align && trim != OFF_NO_TRIM && L->trims &&
                trimmed_by_id(L->trims[ids[k]], trim, origin + (int64_t)first, index + k, o + 2 * k))
                continue;
        } else {
            int32_t len = token_length(L, 0, ids[k]);
            if (len <= 0)
                return -2;
            for (size_t left = (size_t)len; left;) {
                if (ci == stop)
                    return -2; /* the lengths run past the piece */
                size_t rest = utf8_width(buf[ci]) - into;
                if (left < rest) {
                    into += left;
                    break;
                }
                left -= rest;
                into = 0;
                ci++;
            }
        }
        /* the token ends inside character ci (which it covers) or before it */
        put_span(L, buf, first, into ? ci + 1 : ci, origin, align, start_aligned, !into, trim, index + k, ids[k], o + 2 * k);
    }
    if (placed == m)
        return ci == stop && !into ? 0 : -2;
    if (ci == stop)
        return -2; /* the others' lengths leave the last token nothing */
    put_span(L, buf, ci, stop, origin, align, !into, 1, trim, index + placed, ids[placed], o + 2 * placed);
    return 0;
}

/* spans_offsets for one kind of text, made once per kind (aligned or not, trimmed which way),
 * the branches on them out of the loops over tokens */
static inline __attribute__((always_inline)) int spans_body(const OffsetLengths *L, const uint32_t *buf,
                                                            const Word *words, size_t nwords, int64_t origin,
                                                            const uint32_t *align, const int32_t *ids, size_t nids,
                                                            int trim, int32_t *o, size_t index) {
    size_t nchars = L->chars8 ? L->n : 0;
    /* a table beyond the first-level cache: the lengths a piece of several tokens reads, asked
     * for all at once, miss together rather than each in turn in the walk */
    for (size_t j = 0; nchars > 65536 && j < nids; j++)
        __builtin_prefetch(L->chars8 + ((uint32_t)ids[j] < nchars ? ids[j] : 0));
    size_t k = 0;
    for (size_t w = 0; w < nwords; w++) {
        size_t m = words[w].nids, c = words[w].c, stop = c + words[w].nc, j = 0;
        /* a piece the model gave no token (a character it drops) leaves it where the pure path
         * knows the offsets */
        if (!m || m > nids - k)
            return -2;
        if (L->tiles && !align && trim != OFF_NO_TRIM && L->trims) {
            /* trimmed, as below: each whole-character token's span by id (its string's
             * characters being the text's), but for add_prefix_space's exception (a first token,
             * one at the text's start) and a token whose spaces are not known */
            for (; j < m; j++) {
                uint32_t id = (uint32_t)ids[k + j], t = id < nchars ? L->trims[id] : 0;
                size_t chars = t & 0xFF;
                if (!chars || (j + 1 < m ? chars >= stop - c : chars != stop - c) ||
                    !trimmed_by_id(t, trim, origin + (int64_t)c, index + k + j, o + 2 * (k + j)))
                    break;
                c += chars;
            }
            if (j == m) {
                k += m;
                continue;
            }
        } else if (L->tiles) {
            /* most tokens: whole characters from the piece's start on, the last taking what the
             * others leave (most pieces' one token, the whole piece), as word_offsets places
             * them; it takes over from the first that is not */
            for (; j + 1 < m; j++) {
                uint32_t id = (uint32_t)ids[k + j];
                size_t chars = id < nchars ? L->chars8[id] : 0;
                if (!chars && trim == OFF_NO_TRIM) {
                    /* byte fallback: a character's bytes, a token each (no whole characters, one
                     * byte long), each spanning the character */
                    size_t width = utf8_width(buf[c]), t = 0;
                    while (t < width && j + t < m && (uint32_t)ids[k + j + t] < nchars &&
                           !L->chars8[ids[k + j + t]] && token_length(L, 0, ids[k + j + t]) == 1)
                        t++;
                    if (t < width || (j + t == m ? c + 1 != stop : c + 1 >= stop))
                        break;
                    for (size_t b = 0; b < width; b++)
                        put_span(L, buf, c, c + 1, origin, align, 1, 1, trim, 0, 0, o + 2 * (k + j + b));
                    c++;
                    j += width - 1;
                    continue;
                }
                if (!chars || chars >= stop - c)
                    break;
                put_span(L, buf, c, c + chars, origin, align, 1, 1, trim, index + k + j, ids[k + j], o + 2 * (k + j));
                c += chars;
            }
            if (j == m && c == stop) {
                k += m;
                continue;
            }
            if (j + 1 == m && c < stop) {
                put_span(L, buf, c, stop, origin, align, 1, 1, trim, index + k + j, ids[k + j], o + 2 * (k + j));
                k += m;
                continue;
            }
        }
        int err = word_offsets(L, nchars, buf, c, stop - c, origin, align, ids + k + j, m - j, trim, index + k + j,
                               o + 2 * (k + j));
        if (err)
            return err;
        k += m;
    }
    return k != nids ? -2 : 0;
}

/* spans_body for untrimmed spans counted from base, the pieces the stream leaves */
static __attribute__((noinline)) int spans_apart(const OffsetLengths *L, const uint32_t *buf, const Word *words,
                                                 size_t nwords, int64_t base, const int32_t *ids, size_t nids,
                                                 int32_t *o) {
    return spans_body(L, buf, words, nwords, base, NULL, ids, nids, OFF_NO_TRIM, o, 0);
}

/* The tokens a stream runs through before the pieces it passed are checked: a piece it placed
 * wrong (after a gap, one of a token of unknown step) costs at most this many again */
#define STREAM_RUN 128

/* Untrimmed spans counted from base by the tokens' steps (OffsetLengths.steps8): a cursor through
 * the segment's characters, each token starting where the one before ended (a character back
 * for one that continues it) and moving it by the characters it starts, with no look at the
 * pieces as it goes: their tokens' count varies, and a loop over each piece's tokens
 * mispredicts its end at most pieces. After each run the pieces' ends are checked, which checks
 * their tokens too: the cursor enters a piece at its start or before it (after a gap), and no
 * token's step is more than its characters, so it leaves the piece at its end only where each
 * step was the token's (not a byte token spelled by its own characters, nor a character the
 * model dropped) and no gap came before. A piece that fails, or holds a token of unknown step,
 * is placed by spans_body, and the cursor starts again after it while it has redone fewer
 * tokens than the segment has; the rest then go to spans_body too. */
static int spans_stream(const OffsetLengths *L, const uint32_t *buf, const Word *words, size_t nwords, int64_t base,
                        const int32_t *ids, size_t nids, int32_t *o) {
    const uint8_t *steps = L->steps8;
    size_t n = L->n, w = 0, k = 0, i = 0, redone = 0;
    int64_t c = nwords ? base + (int64_t)words[0].c : base;
    while (w < nwords) {
        size_t limit = nids - i > STREAM_RUN ? i + STREAM_RUN : nids;
        for (; i < limit; i++) {
            uint32_t id = (uint32_t)ids[i];
            uint32_t step = id < n ? steps[id] : 0;
            if (!step)
                break;
            o[2 * i] = (int32_t)(c - (step >> 7));
            c += step & OFF_STEP_STARTS;
            o[2 * i + 1] = (int32_t)c;
        }
        int failed = 0;
        for (; w < nwords; w++) {
            size_t m = words[w].nids;
            if (m > i - k)
                break;
            if (!m || o[2 * (k + m) - 1] != base + (int64_t)(words[w].c + words[w].nc)) {
                failed = 1;
                break;
            }
            k += m;
        }
        if (w == nwords)
            break;
        if (!failed && i == limit && limit < nids)
            continue; /* the run ended inside piece w */
        if (redone > nids)
            return spans_apart(L, buf, words + w, nwords - w, base, ids + k, nids - k, o + 2 * k);
        redone += i - k;
        size_t m = words[w].nids;
        if (!m || m > nids - k)
            return -2;
        int err = spans_apart(L, buf, words + w, 1, base, ids + k, m, o + 2 * k);
        if (err)
            return err;
        k += m;
        i = k;
        if (++w < nwords)
            c = base + (int64_t)words[w].c;
    }
    return k != nids ? -2 : 0;
}

int spans_offsets(const OffsetLengths *L, const uint32_t *buf, const Word *words, size_t nwords, int64_t origin,
                  const uint32_t *align, const int32_t *ids, size_t nids, int trim, IdBuf *offs) {
    if (offs->cap - offs->n < 2 * nids && ids_grow(offs, 2 * nids) < 0)
        return -1;
    int32_t *o = offs->v + offs->n;
    size_t index = offs->n / 2;
    int err;
    if (L->steps8 && trim == OFF_NO_TRIM) {
        /* with an alignment, the segment's characters, which spans_map maps in place */
        err = spans_stream(L, buf, words, nwords, align ? 0 : origin, ids, nids, o);
        if (!err && align)
            return spans_map(o, nids, origin, align, offs);
        if (!err)
            offs->n += 2 * nids;
        return err;
    }
#define SPANS_BODY(ALIGN, TRIM) spans_body(L, buf, words, nwords, origin, ALIGN, ids, nids, TRIM, o, index)
    if (align)
        err = trim == OFF_NO_TRIM ? SPANS_BODY(align, OFF_NO_TRIM)
              : trim == OFF_TRIM  ? SPANS_BODY(align, OFF_TRIM)
                                  : SPANS_BODY(align, OFF_TRIM_PREFIX_SPACE);
    else
        err = trim == OFF_NO_TRIM ? SPANS_BODY(NULL, OFF_NO_TRIM)
              : trim == OFF_TRIM  ? SPANS_BODY(NULL, OFF_TRIM)
                                  : SPANS_BODY(NULL, OFF_TRIM_PREFIX_SPACE);
#undef SPANS_BODY
    if (!err)
        offs->n += 2 * nids;
    return err;
}

int spans_map(const int32_t *rel, size_t nids, int64_t origin, const uint32_t *align, IdBuf *offs) {
    if (offs->cap - offs->n < 2 * nids && ids_grow(offs, 2 * nids) < 0)
        return -1;
    int32_t *o = offs->v + offs->n;
    if (align) {
        for (size_t i = 0; i < nids; i++) {
            o[2 * i] = (int32_t)(origin + (int64_t)align[rel[2 * i]]);
            o[2 * i + 1] = (int32_t)(origin + (int64_t)align[rel[2 * i + 1] - 1] + 1);
        }
    } else {
        for (size_t i = 0; i < 2 * nids; i++)
            o[i] = (int32_t)(origin + rel[i]);
    }
    offs->n += 2 * nids;
    return 0;
}

int lengths_spans(const OffsetLengths *L, const Word *piece, const int32_t *ids, int32_t *o) {
    const uint8_t *chars8 = L->cont ? NULL : L->chars8;
    size_t m = piece->nids, n = piece->nc, c = piece->c;
    if (!m || !n || m > LENGTHS_TOKENS_MAX)
        return -2;
    /* each token's length in the piece's units, a token of unknown length (Unigram's unknown
     * or byte token, one at most) taking what the others leave, as piece_offsets */
    size_t lens[LENGTHS_TOKENS_MAX], covered = 0, unknown = m;
    if (m == 1 && ids[0] == L->unk_whole) {
        lens[0] = n;
        covered = n;
    } else if (chars8) {
        size_t j = 0;
        for (; j < m; j++) {
            size_t len = (uint32_t)ids[j] < L->n ? chars8[ids[j]] : 0;
            if (!len && unknown != m)
                break;
            unknown = len ? unknown : j;
            lens[j] = len;
            covered += len;
        }
        if (j < m || (unknown != m && covered >= n)) {
            covered = 0;
        } else if (unknown != m) {
            lens[unknown] = n - covered;
            covered = n;
        }
    } else if (piece->nb == n) {
        /* WordPiece in an ASCII piece: its tokens' bytes are characters */
        for (size_t j = 0; j < m; j++) {
            int32_t len = token_length(L, j > 0, ids[j]);
            if (len <= 0) {
                covered = 0;
                break;
            }
            lens[j] = (size_t)len;
            covered += (size_t)len;
        }
    }
    if (covered != n)
        return -2;
    for (size_t j = 0, p = c; j < m; j++) {
        o[2 * j] = (int32_t)p;
        p += lens[j];
        o[2 * j + 1] = (int32_t)p;
    }
    return 0;
}
