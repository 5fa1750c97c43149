/* Token offsets (transformers' return_offsets_mapping) from the ids a model gave one piece.
 *
 * The BPE and WordPiece models emit ids only; which bytes of the piece each token covers
 * follows from the tokens' byte lengths, as their bytes concatenated are the piece's. A token
 * covering part of a character's bytes covers that character, as HF converts its byte offsets
 * to characters. The lengths come from native.py (OffsetLengths); an id whose length is not
 * known for certain (unknown and byte-fallback tokens, an id spelled two ways) makes the text
 * go back to the pure path, which knows where each token came from, but for a Unigram model,
 * whose Viterbi path is run again to tell each token's bytes (unigram_piece_ranges).
 */
#include "native.h"

/* without branches, so that a piece's byte count is a vector loop */
static inline size_t utf8_width(uint32_t c) {
    return 1 + (size_t)(c >= 0x80) + (size_t)(c >= 0x800) + (size_t)(c >= 0x10000);
}

/* HF's is_whitespace test in ByteLevel's process_offsets, on a token string's characters: the
 * GPT-2 character of the space byte, or a Rust whitespace character. */
int offsets_trimmed_char(uint32_t c) { return c == 0x120 || rust_white_space(c); }

/* ByteLevel's process_offsets on the span of the token of the given index, lead and trail
 * characters of whose string it trims */
static inline void trim_span(int64_t *start, int64_t *end, size_t lead, size_t trail, int trim, size_t index) {
    if (lead == 1 && trim == OFF_TRIM_PREFIX_SPACE && (index == 0 || *start == 0))
        lead = 0;
    if (lead)
        *start = *start + (int64_t)lead < *end ? *start + (int64_t)lead : *end;
    if (trail && *end >= (int64_t)trail)
        *end = *end - (int64_t)trail > *start ? *end - (int64_t)trail : *start;
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
         * unknown there */
        for (size_t i = 0; i < L->n; i++)
            v[i] = full[t][i] <= 0 || (t == 2 && full[t][i] >= 255) ? 0 : full[t][i] >= 255 ? 255 : (uint8_t)full[t][i];
        *compact[t] = v;
    }
    return 0;
}

void offsets_lengths_free(OffsetLengths *L) {
    free(L->first);
    free(L->cont);
    free(L->first8);
    free(L->cont8);
    free(L->chars8);
    *L = (OffsetLengths){0};
}

/* An id's length in bytes, 0 when not known: from the compact table, a vocabulary's tables by id
 * being far larger than the caches, and the full one beyond 254 bytes. */
static inline int32_t token_length(const OffsetLengths *L, int cont, int32_t id) {
    if (id < 0 || (size_t)id >= L->n)
        return 0;
    uint8_t v = (cont ? L->cont8 : L->first8)[id];
    return v == 255 ? (cont ? L->cont : L->first)[id] : v;
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
    for (size_t i = first; start_aligned && i < last && buf[i] == ' '; i++)
        ++*lead;
    for (size_t i = last; end_aligned && i > first && buf[i - 1] == ' '; i--)
        ++*trail;
}

int piece_offsets(const OffsetLengths *L, const uint32_t *cps, size_t n, int64_t origin, const uint32_t *align,
                  const int32_t *ids, size_t nids, const int32_t *ranges, int trim, IdBuf *offs, size_t *used) {
    *used = 0;
    if (!n)
        return 0;
    if (!ranges && L->unk_whole >= 0 && nids == 1 && ids[0] == L->unk_whole) {
        /* WordPiece gives a word it cannot cut one unknown token, covering all of it */
        size_t lead = 0, trail = 0;
        if (trim != OFF_NO_TRIM)
            offsets_spaces(cps, n, &lead, &trail);
        *used = 1;
        return push(offs, from(origin, align, 0), from(origin, align, n - 1) + 1, lead, trail, trim,
                            offs->n / 2);
    }
    if (!ranges && L->chars8 && !L->cont) {
        /* tokens of whole characters (most): their lengths in characters place them */
        size_t c = 0, k = 0;
        for (; c < n && k < nids; k++) {
            uint8_t len = ids[k] >= 0 && (size_t)ids[k] < L->n ? L->chars8[ids[k]] : 0;
            if (!len)
                break;
            c += len;
        }
        if (c == n) {
            for (size_t j = 0, at = 0; j < k; j++) {
                size_t len = L->chars8[ids[j]], lead = 0, trail = 0;
                if (trim != OFF_NO_TRIM)
                    offsets_spaces(cps + at, len, &lead, &trail);
                int err = push(offs, from(origin, align, at), from(origin, align, at + len - 1) + 1, lead, trail, trim,
                               offs->n / 2);
                if (err)
                    return err;
                at += len;
            }
            *used = k;
            return 0;
        }
    }
    size_t ci = 0, cb = 0, cl = utf8_width(cps[0]), b = 0, total = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        total += utf8_width(cps[i]);
    if (!ranges && nids && (size_t)token_length(L, 0, ids[0]) == total) {
        /* one token for the whole piece, most words' */
        size_t lead = 0, trail = 0;
        if (trim != OFF_NO_TRIM)
            edge_spaces(L, cps, 0, n, 1, 1, &lead, &trail);
        *used = 1;
        return push(offs, from(origin, align, 0), from(origin, align, n - 1) + 1, lead, trail, trim, offs->n / 2);
    }
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
        size_t start, end, start_aligned = 1, end_aligned = 1, lead = 0, trail = 0;
        if (ascii) {
            start = b0;
            end = b1;
        } else {
            while (cb + cl <= b0) {
                cb += cl;
                cl = utf8_width(cps[++ci]);
            }
            start = ci;
            start_aligned = cb == b0;
            while (cb + cl < b1) {
                cb += cl;
                cl = utf8_width(cps[++ci]);
            }
            end = ci + 1;
            end_aligned = cb + cl == b1;
        }
        if (trim != OFF_NO_TRIM)
            edge_spaces(L, cps, start, end, (int)start_aligned, (int)end_aligned, &lead, &trail);
        int err = push(offs, from(origin, align, start), from(origin, align, end - 1) + 1, lead, trail, trim,
                               offs->n / 2);
        if (err)
            return err;
        b = b1;
    }
    if (b != total)
        return -2;
    *used = k;
    return 0;
}

/* A BPE token's span trimmed as `trim` says (edge_spaces). */
static inline void token_trim(const OffsetLengths *L, const uint32_t *buf, size_t first, size_t last,
                              int start_aligned, int end_aligned, int trim, size_t index, int64_t *start,
                              int64_t *end) {
    size_t lead, trail;
    edge_spaces(L, buf, first, last, start_aligned, end_aligned, &lead, &trail);
    trim_span(start, end, lead, trail, trim, index);
}

/* spans_offsets where text lies between pieces (a step removed it): a cursor over each piece's
 * characters, ci, of which `into` bytes are covered. o[2k + 1] holds token k's length. */
static int walk_offsets(const OffsetLengths *L, const uint32_t *buf, const Span *spans, size_t nspans,
                        int64_t origin, const uint32_t *align, size_t nids, int trim, size_t index, int32_t *o) {
    size_t k = 0;
    for (size_t p = 0; p < nspans; p++) {
        size_t ci = spans[p].start, stop = spans[p].end, into = 0;
        while (ci < stop) {
            if (k == nids)
                return -2;
            int32_t len = o[2 * k + 1];
            if (len <= 0)
                return -2;
            size_t first = ci, left = (size_t)len;
            int start_aligned = !into;
            while (left) {
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
            /* the token ends inside character ci (which it covers) or before it */
            size_t last = into ? ci + 1 : ci;
            int64_t start = origin + (int64_t)(align ? align[first] : first);
            int64_t end = origin + (int64_t)(align ? align[last - 1] : last - 1) + 1;
            if (trim != OFF_NO_TRIM)
                token_trim(L, buf, first, last, start_aligned, !into, trim, index + k, &start, &end);
            if (start > INT32_MAX || end > INT32_MAX)
                return -2;
            o[2 * k] = (int32_t)start;
            o[2 * k + 1] = (int32_t)end;
            k++;
        }
    }
    return k == nids ? 0 : -2;
}

static int scratch_grow(CpBuf *b, size_t n) {
    if (b->cap >= n)
        return 0;
    uint32_t *v = realloc(b->v, n * sizeof *v);
    if (!v)
        return -1;
    b->v = v;
    b->cap = n;
    return 0;
}

uint8_t *offsets_scratch_bytes(CpBuf *b, size_t n) {
    return scratch_grow(b, n / 4 + 1) < 0 ? NULL : (uint8_t *)(void *)b->v;
}

/* spans_offsets on pieces one after another, buf[s0..s0 + n) (nb bytes of UTF-8): the tokens'
 * ranges are their lengths' running sums, with no branch on a token's or a character's width
 * (those mispredict); a piece's tokens are right when every piece ends where a token does.
 * o[2k + 1] holds token k's length: in characters when in_chars, else in bytes, which tables
 * of the text's bytes map to characters (but for ASCII text). */
static int run_offsets(const OffsetLengths *L, const uint32_t *buf, const Span *spans, size_t nspans, int64_t origin,
                       const uint32_t *align, size_t nids, int trim, size_t index, int32_t *o, CpBuf *scratch,
                       int in_chars) {
    size_t s0 = spans[0].start, n = spans[nspans - 1].end - s0, nb = in_chars ? n : 0;
    uint32_t any = 0;
    for (size_t i = 0; !in_chars && i < n; i++) {
        any |= buf[s0 + i];
        nb += utf8_width(buf[s0 + i]);
    }
    /* the lengths count characters */
    int ascii = in_chars || any < 0x80;
    /* char_at[b]: the character byte b is in (4 written a character); byte_at[c]: character c's
     * first byte, byte_at[n] = nb; ends[b]: whether a token ends before byte b */
    if (scratch_grow(scratch, (ascii ? 0 : nb + 4 + n + 1) + nb / 4 + 1) < 0)
        return -1;
    uint32_t *char_at = scratch->v, *byte_at = char_at + nb + 4;
    uint8_t *ends = (uint8_t *)(void *)(ascii ? scratch->v : byte_at + n + 1);
    memset(ends, 0, nb + 1);
    if (!ascii) {
        const uint32_t *t = buf + s0;
        size_t b = 0, c = 0;
        while (c < n) {
            /* eight ASCII characters at once, the most of most text that is not all ASCII */
            if (c + 8 <= n &&
                (t[c] | t[c + 1] | t[c + 2] | t[c + 3] | t[c + 4] | t[c + 5] | t[c + 6] | t[c + 7]) < 0x80) {
                for (size_t j = 0; j < 8; j++) {
                    byte_at[c + j] = (uint32_t)(b + j);
                    char_at[b + j] = (uint32_t)(c + j);
                }
                b += 8;
                c += 8;
                continue;
            }
            byte_at[c] = (uint32_t)b;
            for (size_t j = 0; j < 4; j++)
                char_at[b + j] = (uint32_t)c;
            b += utf8_width(t[c++]);
        }
        byte_at[n] = (uint32_t)nb;
    }
    const uint32_t *at = align ? align + s0 : NULL;
    int64_t base = origin + (int64_t)(align ? 0 : s0);
    size_t b0 = 0;
    for (size_t k = 0; k < nids; k++) {
        int32_t len = o[2 * k + 1];
        if (len <= 0 || (size_t)len > nb - b0)
            return -2;
        size_t b1 = b0 + (size_t)len;
        ends[b1] = 1;
        size_t first = ascii ? b0 : char_at[b0], last = ascii ? b1 : char_at[b1 - 1] + 1;
        int64_t start = base + (int64_t)(at ? at[first] : first);
        int64_t end = base + (int64_t)(at ? at[last - 1] : last - 1) + 1;
        if (trim != OFF_NO_TRIM)
            token_trim(L, buf + s0, first, last, ascii || byte_at[first] == b0, ascii || byte_at[last] == b1, trim,
                       index + k, &start, &end);
        if (start > INT32_MAX || end > INT32_MAX)
            return -2;
        o[2 * k] = (int32_t)start;
        o[2 * k + 1] = (int32_t)end;
        b0 = b1;
    }
    if (b0 != nb)
        return -2;
    for (size_t p = 0; p < nspans; p++) {
        size_t c = spans[p].end - s0;
        if (!ends[ascii ? c : byte_at[c]] && spans[p].end > spans[p].start)
            return -2;
    }
    return 0;
}

int spans_offsets(const OffsetLengths *L, const uint32_t *buf, const Span *spans, size_t nspans, int64_t origin,
                  const uint32_t *align, const int32_t *ids, size_t nids, int trim, IdBuf *offs, CpBuf *scratch) {
    if (offs->cap - offs->n < 2 * nids && ids_grow(offs, 2 * nids) < 0)
        return -1;
    int32_t *o = offs->v + offs->n;
    int contiguous = nspans > 0;
    for (size_t p = 1; p < nspans; p++)
        contiguous &= spans[p].start == spans[p - 1].end;
    /* the tokens' lengths first, where each token's span goes: lookups in a table larger than
     * the caches that do not wait for one another. In characters where every token is whole
     * characters, as most are: then no character of the text need be looked at. */
    int in_chars = contiguous && L->chars8;
    for (size_t k = 0; in_chars && k < nids; k++)
        in_chars &= (o[2 * k + 1] = ids[k] >= 0 && (size_t)ids[k] < L->n ? L->chars8[ids[k]] : 0) != 0;
    for (size_t k = 0; !in_chars && k < nids; k++)
        o[2 * k + 1] = token_length(L, 0, ids[k]);
    int err = !contiguous ? walk_offsets(L, buf, spans, nspans, origin, align, nids, trim, offs->n / 2, o)
                          : run_offsets(L, buf, spans, nspans, origin, align, nids, trim, offs->n / 2, o, scratch,
                                        in_chars);
    if (!err)
        offs->n += 2 * nids;
    return err;
}

int piece_ranges_from_lengths(const OffsetLengths *L, const uint32_t *cps, size_t n, const int32_t *ids, size_t nids,
                              IdBuf *ranges) {
    size_t total = 0, known = 0, unknown = nids;
    for (size_t i = 0; i < n; i++)
        total += utf8_width(cps[i]);
    for (size_t k = 0; k < nids; k++) {
        int32_t len = token_length(L, 0, ids[k]);
        if (len > 0) {
            known += (size_t)len;
        } else if (unknown == nids) {
            unknown = k;
        } else {
            return -2;
        }
    }
    if (known >= total || total > INT32_MAX || unknown == nids)
        return -2;
    ranges->n = 0;
    if (ranges->cap < 2 * nids && ids_grow(ranges, 2 * nids) < 0)
        return -1;
    size_t b = 0;
    for (size_t k = 0; k < nids; k++) {
        size_t len = k == unknown ? total - known : (size_t)token_length(L, 0, ids[k]);
        ranges->v[ranges->n++] = (int32_t)b;
        ranges->v[ranges->n++] = (int32_t)(b + len);
        b += len;
    }
    return 0;
}
