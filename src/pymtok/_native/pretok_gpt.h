/* The GPT-family matchers (pretok.c), written once for two kinds of text: code points (CH
 * uint32_t, M(name) the name itself) and ASCII bytes (CH uint8_t, M(name) name_bytes), which
 * ascii_split scans where a segment is ASCII. Included by pretok.c, once for each. */

static inline size_t M(run)(const CH *s, size_t n, size_t i, uint32_t mask) {
    while (i < n && IS(s[i], mask))
        i++;
    return i;
}

/* run(s, n, i, mask) for a mask whose ASCII members are the 26 letters from `first` once ORed
 * with `fold` (0x20 folds case): ASCII members counted 16 at a time where SSE2 has them, as one
 * comparison and the count of the leading members, with no branch on where the run ends (which
 * a loop mispredicts about once a piece); the scalar run finishes it (a member beyond ASCII,
 * the last characters of s). */
static inline size_t M(run_ascii)(const CH *s, size_t n, size_t i, uint32_t mask, char first, char fold) {
#ifdef __SSE2__
    const __m128i f = _mm_set1_epi8(fold);
    while (i + 16 <= n) {
        unsigned members = (unsigned)_mm_movemask_epi8(in_range16(_mm_or_si128(M(ascii16)(s + i), f), first, 26));
        size_t k = (size_t)__builtin_ctz(~members);
        i += k;
        if (k < 16)
            break;
    }
#else
    (void)first;
    (void)fold;
#endif
    return M(run)(s, n, i, mask);
}

static inline size_t M(run_letters)(const CH *s, size_t n, size_t i) { return M(run_ascii)(s, n, i, L_, 'a', 0x20); }

static inline size_t M(run_other)(const CH *s, size_t n, size_t i) {
    while (i < n && IS_OTHER(s[i]))
        i++;
    return i;
}

static inline size_t M(run_crlf)(const CH *s, size_t n, size_t i) {
    while (i < n && IS_CRLF(s[i]))
        i++;
    return i;
}

/* `(?i:'s|'t|'re|'ve|'m|'ll|'d)` after the apostrophe at i-1; returns the end or 0.
 * Oniguruma's case folding adds U+017F (long s) to s/S; no other code point folds onto these
 * letters (checked against HF on every code point). */
static inline size_t M(contraction_ci)(const CH *s, size_t n, size_t i) {
    if (i >= n)
        return 0;
    uint32_t c = s[i], a = c | 0x20; /* ASCII lower case; the result is only compared to ASCII */
    if (c > 0x7F && c != 0x17F)
        return 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd' || c == 0x17F)
        return i + 1;
    if (i + 1 >= n || s[i + 1] > 0x7F)
        return 0;
    uint32_t b = s[i + 1] | 0x20;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l'))
        return i + 2;
    return 0;
}

/* `'s|'t|'re|'ve|'m|'ll|'d` after the apostrophe at i-1 (case-sensitive); returns the end or 0. */
static inline size_t M(contraction)(const CH *s, size_t n, size_t i) {
    if (i >= n)
        return 0;
    uint32_t a = s[i];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return i + 1;
    if (i + 1 < n && (((a == 'r' || a == 'v') && s[i + 1] == 'e') || (a == 'l' && s[i + 1] == 'l')))
        return i + 2;
    return 0;
}

/* The whitespace alternatives shared by the GPT-style patterns, at a whitespace character:
 * `\s*[\r\n]+|\s+(?!\S)|\s+` (with_crlf) or `\s+(?!\S)|\s+` (GPT-2). */
static inline size_t M(whitespace_tail)(const CH *s, size_t n, size_t i, int with_crlf) {
    size_t e = M(run)(s, n, i, WS_);
    if (with_crlf) {
        /* \s* gives back characters until [\r\n]+ can match: up to the last \r or \n */
        for (size_t k = e; k > i; k--)
            if (IS_CRLF(s[k - 1]))
                return k;
    }
    if (e == n || e - 1 == i)
        return e; /* (?!\S) holds at the end; a single space before \S falls to \s+ */
    return e - 1;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t M(m_gpt2)(const CH *s, size_t n, size_t i) {
    uint32_t c = s[i];
    size_t e;
    if (c == '\'' && (e = M(contraction)(s, n, i + 1)))
        return e;
    size_t j = (c == ' ' && i + 1 < n) ? i + 1 : i;
    uint32_t d = s[j];
    if (IS(d, L_))
        return M(run_letters)(s, n, j);
    if (IS(d, N_))
        return M(run)(s, n, j, N_);
    if (IS_OTHER(d))
        return M(run_other)(s, n, j);
    if (IS(c, WS_))
        return M(whitespace_tail)(s, n, i, 0);
    return i;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with D = 3 (cl100k, Llama 3) or 1 (Qwen2/3). */
static inline size_t M(m_cl100k_like)(const CH *s, size_t n, size_t i, size_t max_digits) {
    uint32_t c = s[i];
    if (c == '\'') {
        size_t e = M(contraction_ci)(s, n, i + 1);
        if (e)
            return e;
    }
    uint32_t cls = ucls(c);
    if (cls & L_)
        return M(run_letters)(s, n, i);
    if (!(cls & N_) && !IS_CRLF(c) && i + 1 < n && IS(s[i + 1], L_))
        return M(run_letters)(s, n, i + 1);
    if (cls & N_) {
        size_t e = i;
        while (e < n && e - i < max_digits && IS(s[e], N_))
            e++;
        return e;
    }
    size_t j = (c == ' ' && i + 1 < n && IS_OTHER(s[i + 1])) ? i + 1 : i;
    if (IS_OTHER(s[j]))
        return M(run_crlf)(s, n, M(run_other)(s, n, j));
    if (cls & WS_)
        return M(whitespace_tail)(s, n, i, 1);
    return i;
}

static size_t M(m_cl100k)(const CH *s, size_t n, size_t i) { return M(m_cl100k_like)(s, n, i, 3); }
static size_t M(m_qwen2)(const CH *s, size_t n, size_t i) { return M(m_cl100k_like)(s, n, i, 1); }

/* o200k (GPT-4o):
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
/* The ASCII members of UPPERISH and LOWERISH are A-Z and a-z. The alternatives of o200k often
 * try a run that is empty, which an ASCII character says at once. */
static inline size_t M(run_upperish)(const CH *s, size_t n, size_t i) {
    return i < n && s[i] < 0x80 && (uint32_t)s[i] - 'A' >= 26 ? i : M(run_ascii)(s, n, i, UPPERISH, 'A', 0);
}

static inline size_t M(run_lowerish)(const CH *s, size_t n, size_t i) {
    return i < n && s[i] < 0x80 && (uint32_t)s[i] - 'a' >= 26 ? i : M(run_ascii)(s, n, i, LOWERISH, 'a', 0);
}

/* [Upper]*[lower]+ from i: the greedy star gives back characters until a lower-ish one can
 * start the plus; returns the end or 0. */
static inline size_t M(upper_star_lower_plus)(const CH *s, size_t n, size_t i) {
    size_t u = M(run_upperish)(s, n, i);
    if (u < n && IS(s[u], LOWERISH))
        return M(run_lowerish)(s, n, u);
    /* the plus starts inside the upper-ish run; the character after it is not lower-ish */
    for (size_t m = u; m > i; m--)
        if (IS(s[m - 1], LOWERISH))
            return m;
    return 0;
}

static inline size_t M(upper_plus_lower_star)(const CH *s, size_t n, size_t i) {
    size_t u = M(run_upperish)(s, n, i);
    return u > i ? M(run_lowerish)(s, n, u) : 0;
}

static inline size_t M(with_contraction)(const CH *s, size_t n, size_t e) {
    if (e < n && s[e] == '\'') {
        size_t c = M(contraction_ci)(s, n, e + 1);
        if (c)
            return c;
    }
    return e;
}

static size_t M(m_o200k)(const CH *s, size_t n, size_t i) {
    uint32_t c = s[i];
    uint32_t cls = ucls(c);
    int lead = !(cls & (L_ | N_)) && !IS_CRLF(c) && i + 1 < n; /* [^\r\n\p{L}\p{N}]? can take c */
    size_t e;
    if (lead && (e = M(upper_star_lower_plus)(s, n, i + 1)))
        return M(with_contraction)(s, n, e);
    if ((e = M(upper_star_lower_plus)(s, n, i)))
        return M(with_contraction)(s, n, e);
    if (lead && (e = M(upper_plus_lower_star)(s, n, i + 1)))
        return M(with_contraction)(s, n, e);
    if ((e = M(upper_plus_lower_star)(s, n, i)))
        return M(with_contraction)(s, n, e);
    if (cls & N_) {
        e = i;
        while (e < n && e - i < 3 && IS(s[e], N_))
            e++;
        return e;
    }
    size_t j = (c == ' ' && i + 1 < n && IS_OTHER(s[i + 1])) ? i + 1 : i;
    if (IS_OTHER(s[j])) {
        e = M(run_other)(s, n, j);
        while (e < n && (IS_CRLF(s[e]) || s[e] == '/'))
            e++;
        return e;
    }
    if (cls & WS_)
        return M(whitespace_tail)(s, n, i, 1);
    return i;
}
