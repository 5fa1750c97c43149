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

static size_t utf8_width(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

/* HF's is_whitespace test in ByteLevel's process_offsets, on a token string's characters: the
 * GPT-2 character of the space byte, or a Rust whitespace character. */
int offsets_trimmed_char(uint32_t c) { return c == 0x120 || rust_white_space(c); }

int offsets_push(IdBuf *offs, int64_t start, int64_t end, size_t lead, size_t trail, int trim, size_t index) {
    if (trim != OFF_NO_TRIM) {
        /* ByteLevel's process_offsets */
        if (lead == 1 && trim == OFF_TRIM_PREFIX_SPACE && (index == 0 || start == 0))
            lead = 0;
        if (lead)
            start = start + (int64_t)lead < end ? start + (int64_t)lead : end;
        if (trail && end >= (int64_t)trail)
            end = end - (int64_t)trail > start ? end - (int64_t)trail : start;
    }
    if (start > INT32_MAX || end > INT32_MAX)
        return -2;
    if (offs->cap - offs->n < 2 && ids_grow(offs, 2) < 0)
        return -1;
    offs->v[offs->n++] = (int32_t)start;
    offs->v[offs->n++] = (int32_t)end;
    return 0;
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

/* The caller's character a piece's character i comes from: align[i] (a normalizer's), else i. */
static int64_t from(int64_t origin, const uint32_t *align, size_t i) { return origin + (int64_t)(align ? align[i] : i); }

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
        return offsets_push(offs, from(origin, align, 0), from(origin, align, n - 1) + 1, lead, trail, trim,
                            offs->n / 2);
    }
    size_t ci = 0, cb = 0, cl = utf8_width(cps[0]), b = 0, total = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        total += utf8_width(cps[i]);
    for (; ranges ? k < nids : b < total; k++) {
        size_t b0 = b, b1;
        if (ranges) {
            /* the bytes the model says; a byte token repeats its run's, whose offsets it takes */
            if (k && ranges[2 * k] == ranges[2 * k - 2] && ranges[2 * k + 1] == ranges[2 * k - 1]) {
                int err = offsets_push(offs, offs->v[offs->n - 2], offs->v[offs->n - 1], 0, 0, OFF_NO_TRIM, 0);
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
            const int32_t *table = k && L->cont ? L->cont : L->first;
            int32_t id = ids[k], len = id >= 0 && (size_t)id < L->n ? table[id] : -1;
            if (len <= 0 || b + (size_t)len > total)
                return -2;
            b1 = b + (size_t)len;
        }
        while (cb + cl <= b0) {
            cb += cl;
            cl = utf8_width(cps[++ci]);
        }
        size_t start = ci, start_aligned = cb == b0;
        while (cb + cl < b1) {
            cb += cl;
            cl = utf8_width(cps[++ci]);
        }
        size_t end = ci + 1, lead = 0, trail = 0;
        if (trim != OFF_NO_TRIM) {
            if (L->byte_level) {
                /* the token's string holds a GPT-2 space for each space byte, and no other
                 * character ByteLevel trims; a space is one whole character */
                for (size_t i = start; start_aligned && i < end && cps[i] == ' '; i++)
                    lead++;
                for (size_t i = end; cb + cl == b1 && i > start && cps[i - 1] == ' '; i--)
                    trail++;
            } else {
                offsets_spaces(cps + start, end - start, &lead, &trail);
            }
        }
        int err = offsets_push(offs, from(origin, align, start), from(origin, align, end - 1) + 1, lead, trail, trim,
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

int piece_ranges_from_lengths(const OffsetLengths *L, const uint32_t *cps, size_t n, const int32_t *ids, size_t nids,
                              IdBuf *ranges) {
    size_t total = 0, known = 0, unknown = nids;
    for (size_t i = 0; i < n; i++)
        total += utf8_width(cps[i]);
    for (size_t k = 0; k < nids; k++) {
        int32_t len = ids[k] >= 0 && (size_t)ids[k] < L->n ? L->first[ids[k]] : -1;
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
        size_t len = k == unknown ? total - known : (size_t)L->first[ids[k]];
        ranges->v[ranges->n++] = (int32_t)b;
        ranges->v[ranges->n++] = (int32_t)(b + len);
        b += len;
    }
    return 0;
}
