/* A small backtracking regex engine for the Split patterns that have no hand-written scanner.
 *
 * It takes the part of Oniguruma's Ruby syntax that tokenizer patterns use and matches as
 * Oniguruma does: leftmost-first (the first alternative that matches wins), greedy quantifiers
 * giving back one character at a time, lookaheads atomic, the subject being one piece (its end
 * is the end of the string). regex_compile refuses everything else, so that a pattern it
 * accepts matches exactly as HF's; native.py also refuses the patterns that may backtrack
 * catastrophically (pymtok.backtracking), so no time limit is needed here. It refuses:
 *
 *   - patterns that can match the empty string, and quantifiers on a body that can (where
 *     Oniguruma's empty-loop checks would decide);
 *   - lazy quantifiers, possessive ones but on a single character, quantifiers of quantifiers,
 *     braces that are no interval;
 *   - backreferences, named groups, lookbehind, atomic groups, absent operators, conditionals,
 *     option flags but (?i:...), \b \B \G \K \R \X, octal escapes, control escapes;
 *   - in classes: intersections (&&), negated nested classes, a leading ']', a '-' that is no
 *     range between two characters nor the first or last item;
 *   - patterns of more than MAX_CODE instructions, intervals expanded (x{2,4} is xx(x(x)?)?);
 *   - \p{..} that is no general category (scripts, binary properties), POSIX brackets other
 *     than alpha alnum digit punct space upper lower xdigit word ascii, a \x byte beyond ASCII
 *     (Oniguruma takes it for a piece of UTF-8 and fails);
 *   - under (?i:...): class escapes, POSIX brackets and characters beyond ASCII. Oniguruma
 *     folds with Unicode's case folding, simple and full: an ASCII letter matches its other case,
 *     's' also U+017F (long s) and 'k' U+212A (Kelvin sign), no other code point folds onto
 *     an ASCII letter by a simple folding. Full (multi-character) foldings make a string
 *     match one character (Oniguruma's "ss" matches U+00DF, "st" U+FB06, "ff" "fi" "fl" their
 *     ligatures), so an 's' or 'f' that may be followed by one of 's', 't', 'f', 'i', 'l' is
 *     refused, as are the characters that fold to several (U+00DF), being beyond ASCII
 *     (classes of ASCII characters take no part in these: see class_fold).
 *
 * Character classes come from unicode_data.h, generated from the pure path's own predicates
 * (onig.py), through unicode_class(); a class keeps its ASCII members as a bitmap. As in
 * Oniguruma, \w alone is not \w in brackets (see class_escape).
 */
#include "native.h"

#define U_NAMES_ONLY
#include "unicode_data.h"

/* ---- character classes ----------------------------------------------------------------- */

typedef struct {
    uint32_t lo, hi;
} Range;

/* negate XOR (a code point in the ranges, with one of the flags, of one of the categories, or
 * outside one of the negated items: \S, \P{L}, [:^alpha:]) */
typedef struct {
    uint32_t ascii[4];
    uint32_t flags, gcs;
    struct {
        uint32_t flags, gcs;
    } neg[8];
    size_t nneg;
    Range *ranges;
    size_t nranges, cap;
    int negate;
} Class;

static int class_slow(const Class *cl, uint32_t c) {
    uint32_t u = unicode_class(c), gc = 1u << (u >> U_GC_SHIFT);
    int in = (u & cl->flags) || (cl->gcs & gc);
    for (size_t k = 0; k < cl->nneg && !in; k++)
        in = !((u & cl->neg[k].flags) || (cl->neg[k].gcs & gc));
    for (size_t k = 0; k < cl->nranges && !in; k++)
        in = c >= cl->ranges[k].lo && c <= cl->ranges[k].hi;
    return in ^ cl->negate;
}

static inline int class_has(const Class *cl, uint32_t c) {
    return c < 0x80 ? (int)(cl->ascii[c >> 5] >> (c & 31) & 1) : class_slow(cl, c);
}

static int class_range(Class *cl, uint32_t lo, uint32_t hi) {
    if (cl->nranges == cl->cap) {
        size_t cap = cl->cap ? cl->cap * 2 : 8;
        Range *v = realloc(cl->ranges, cap * sizeof *v);
        if (!v)
            return -1;
        cl->ranges = v;
        cl->cap = cap;
    }
    cl->ranges[cl->nranges++] = (Range){lo, hi};
    return 0;
}

static void class_seal(Class *cl) {
    for (uint32_t c = 0; c < 0x80; c++)
        if (class_slow(cl, c))
            cl->ascii[c >> 5] |= 1u << (c & 31);
}

/* ---- the program ------------------------------------------------------------------------- */

enum Op { OP_CHAR, OP_SET, OP_RUN, OP_SPLIT, OP_JMP, OP_LOOK, OP_ASSERT, OP_MATCH };
enum Anchor { A_BOL, A_EOL, A_BEGIN, A_END, A_SEMI_END };

#define UNBOUNDED UINT32_MAX
#define MAX_CODE 65536
#define MAX_COUNT 1000

typedef struct {
    uint8_t op;
    uint8_t neg;      /* OP_LOOK: (?!...); OP_RUN: possessive, nothing given back */
    uint8_t filter;   /* OP_SPLIT: the first branch consumes a character first, one of `first` when ASCII */
    uint32_t x;       /* the character, class, branch or jump target, end of a lookahead, anchor */
    uint32_t min, max; /* OP_RUN */
    uint32_t first[4];
} Inst;

struct Regex {
    Inst *code;
    Class *classes;
    size_t nclasses;
    uint32_t first[4]; /* the ASCII characters a match may start with */
};

/* ---- parsing ------------------------------------------------------------------------------ */

enum NodeType { N_CHAR, N_SET, N_CAT, N_ALT, N_REP, N_LOOK, N_ASSERT };

typedef struct {
    int type;
    uint32_t x, min, max;
    int child, next; /* first child, next sibling: -1 for none */
    uint32_t minlen; /* the fewest characters it matches (saturated) */
    int fstart, fend; /* under (?i): it may start with a folded s t f i l, end with a folded s f */
} Node;

typedef struct {
    const uint32_t *p;
    size_t n, i;
    Node *nodes;
    size_t nnodes, capnodes;
    Class *classes;
    size_t nclasses, capclasses;
    const char *err;
    int fold, depth;
} Parser;

static int refuse(Parser *ps, const char *why) {
    if (!ps->err)
        ps->err = why;
    return -1;
}

static int node_new(Parser *ps, int type) {
    if (ps->nnodes == ps->capnodes) {
        size_t cap = ps->capnodes ? ps->capnodes * 2 : 32;
        Node *v = realloc(ps->nodes, cap * sizeof *v);
        if (!v)
            return refuse(ps, "out of memory");
        ps->nodes = v;
        ps->capnodes = cap;
    }
    ps->nodes[ps->nnodes] = (Node){.type = type, .child = -1, .next = -1};
    return (int)ps->nnodes++;
}

static Class *class_new(Parser *ps, int *index) {
    if (ps->nclasses == ps->capclasses) {
        size_t cap = ps->capclasses ? ps->capclasses * 2 : 8;
        Class *v = realloc(ps->classes, cap * sizeof *v);
        if (!v) {
            refuse(ps, "out of memory");
            return NULL;
        }
        ps->classes = v;
        ps->capclasses = cap;
    }
    *index = (int)ps->nclasses;
    Class *cl = &ps->classes[ps->nclasses++];
    memset(cl, 0, sizeof *cl);
    return cl;
}

static int set_node(Parser *ps, int cls) {
    int k = node_new(ps, N_SET);
    if (k >= 0) {
        ps->nodes[k].x = (uint32_t)cls;
        ps->nodes[k].minlen = 1;
    }
    return k;
}

static inline int at(const Parser *ps, uint32_t c) { return ps->i < ps->n && ps->p[ps->i] == c; }

static int hex_value(uint32_t c) {
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (int)((c | 0x20) - 'a' + 10);
    return -1;
}

/* hex digits from i, at most `most`; -1 when there are fewer than `least` or it is no code point */
static int64_t hex_run(Parser *ps, size_t least, size_t most) {
    int64_t v = 0;
    size_t k = 0;
    for (; k < most && ps->i < ps->n && hex_value(ps->p[ps->i]) >= 0; k++, ps->i++)
        v = v * 16 + hex_value(ps->p[ps->i]);
    return k < least || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ? -1 : v;
}

/* The general categories (as bits by index) a \p{name} names, 0 for a name not known here.
 * Oniguruma ignores case, spaces, '-' and '_' in property names. */
static uint32_t category_mask(const uint32_t *name, size_t len) {
    static const struct {
        const char *name;
        uint32_t gcs;
    } names[] = {
#define G(x) (1u << U_GC_##x)
        {"l", G(Lu) | G(Ll) | G(Lt) | G(Lm) | G(Lo)}, {"letter", G(Lu) | G(Ll) | G(Lt) | G(Lm) | G(Lo)},
        {"lc", G(Lu) | G(Ll) | G(Lt)}, {"casedletter", G(Lu) | G(Ll) | G(Lt)},
        {"lu", G(Lu)}, {"uppercaseletter", G(Lu)}, {"ll", G(Ll)}, {"lowercaseletter", G(Ll)},
        {"lt", G(Lt)}, {"titlecaseletter", G(Lt)}, {"lm", G(Lm)}, {"modifierletter", G(Lm)},
        {"lo", G(Lo)}, {"otherletter", G(Lo)},
        {"m", G(Mn) | G(Mc) | G(Me)}, {"mark", G(Mn) | G(Mc) | G(Me)}, {"mn", G(Mn)}, {"nonspacingmark", G(Mn)},
        {"mc", G(Mc)}, {"spacingmark", G(Mc)}, {"me", G(Me)}, {"enclosingmark", G(Me)},
        {"n", G(Nd) | G(Nl) | G(No)}, {"number", G(Nd) | G(Nl) | G(No)}, {"nd", G(Nd)}, {"decimalnumber", G(Nd)},
        {"nl", G(Nl)}, {"letternumber", G(Nl)}, {"no", G(No)}, {"othernumber", G(No)},
        {"p", G(Pc) | G(Pd) | G(Ps) | G(Pe) | G(Pi) | G(Pf) | G(Po)},
        {"punctuation", G(Pc) | G(Pd) | G(Ps) | G(Pe) | G(Pi) | G(Pf) | G(Po)},
        {"pc", G(Pc)}, {"connectorpunctuation", G(Pc)}, {"pd", G(Pd)}, {"dashpunctuation", G(Pd)},
        {"ps", G(Ps)}, {"openpunctuation", G(Ps)}, {"pe", G(Pe)}, {"closepunctuation", G(Pe)},
        {"pi", G(Pi)}, {"initialpunctuation", G(Pi)}, {"pf", G(Pf)}, {"finalpunctuation", G(Pf)},
        {"po", G(Po)}, {"otherpunctuation", G(Po)},
        {"s", G(Sm) | G(Sc) | G(Sk) | G(So)}, {"symbol", G(Sm) | G(Sc) | G(Sk) | G(So)},
        {"sm", G(Sm)}, {"mathsymbol", G(Sm)}, {"sc", G(Sc)}, {"currencysymbol", G(Sc)},
        {"sk", G(Sk)}, {"modifiersymbol", G(Sk)}, {"so", G(So)}, {"othersymbol", G(So)},
        {"z", G(Zs) | G(Zl) | G(Zp)}, {"separator", G(Zs) | G(Zl) | G(Zp)}, {"zs", G(Zs)}, {"spaceseparator", G(Zs)},
        {"zl", G(Zl)}, {"lineseparator", G(Zl)}, {"zp", G(Zp)}, {"paragraphseparator", G(Zp)},
        {"c", G(Cc) | G(Cf) | G(Cs) | G(Co) | G(Cn)}, {"other", G(Cc) | G(Cf) | G(Cs) | G(Co) | G(Cn)},
        {"cc", G(Cc)}, {"control", G(Cc)}, {"cf", G(Cf)}, {"format", G(Cf)}, {"cs", G(Cs)}, {"surrogate", G(Cs)},
        {"co", G(Co)}, {"privateuse", G(Co)}, {"cn", G(Cn)}, {"unassigned", G(Cn)},
#undef G
    };
    char key[32];
    size_t k = 0;
    for (size_t j = 0; j < len; j++) {
        uint32_t c = name[j];
        if (c == ' ' || c == '-' || c == '_')
            continue;
        /* every known name is letters: any other character (a NUL too, which would end the
         * key early and make "L\0x" the name "l") names nothing */
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || k + 1 >= sizeof key)
            return 0;
        key[k++] = (char)(c | 0x20);
    }
    key[k] = 0;
    for (size_t j = 0; j < sizeof names / sizeof *names; j++)
        if (strcmp(key, names[j].name) == 0)
            return names[j].gcs;
    return 0;
}

/* Adds to cl the class an escape at i (after the backslash) names: \d \w \s \h, their negations,
 * \p{..} \P{..} \p{^..}. Returns 1 if it was one, 0 if the escape is something else, -1 refused. */
static int class_escape(Parser *ps, Class *cl, int alone) {
    uint32_t e = ps->p[ps->i];
    uint32_t flags = 0, gcs = 0;
    int neg = e == 'D' || e == 'W' || e == 'S' || e == 'H' || e == 'P';
    switch (e | 0x20) {
    case 'd':
        gcs = 1u << U_GC_Nd;
        break;
    case 'w':
        /* Oniguruma's \w alone takes the Latin-1 digits and fractions (its ctype table), in a
         * bracket class not (Unicode's Word): [^\w\s] matches U+00BD, which \w matches too */
        flags = alone ? U_ONIG_WORD : U_POSIX_WORD;
        break;
    case 's':
        flags = U_WS;
        break;
    case 'h':
        break;
    case 'p': {
        if (ps->i + 1 >= ps->n || ps->p[ps->i + 1] != '{')
            return refuse(ps, "\\p without braces");
        size_t start = ps->i + 2, end = start;
        while (end < ps->n && ps->p[end] != '}')
            end++;
        if (end == ps->n)
            return refuse(ps, "unterminated \\p{");
        if (start < end && ps->p[start] == '^') {
            neg = !neg;
            start++;
        }
        if (!(gcs = category_mask(ps->p + start, end - start)))
            return refuse(ps, "a \\p{..} that is no general category");
        ps->i = end;
        break;
    }
    default:
        return 0;
    }
    ps->i++;
    if ((e | 0x20) == 'h') {
        /* Ruby's \h: ASCII hexadecimal digits; \H only as a class of its own */
        if (neg) {
            if (!alone)
                return refuse(ps, "\\H in a class");
            cl->negate = 1;
        }
        if (class_range(cl, '0', '9') || class_range(cl, 'A', 'F') || class_range(cl, 'a', 'f'))
            return refuse(ps, "out of memory");
        return 1;
    }
    if (!neg) {
        cl->flags |= flags;
        cl->gcs |= gcs;
    } else {
        if (cl->nneg == sizeof cl->neg / sizeof *cl->neg)
            return refuse(ps, "too many negated items in a class");
        cl->neg[cl->nneg].flags = flags;
        cl->neg[cl->nneg++].gcs = gcs;
    }
    return 1;
}

/* A character escape at i (after the backslash): its code point, or -1 (refused, ps->err set). */
static int64_t char_escape(Parser *ps) {
    uint32_t e = ps->p[ps->i++];
    switch (e) {
    case 't': return '\t';
    case 'n': return '\n';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case 'a': return 7;
    case 'e': return 27;
    case 'x': {
        int64_t v;
        if (at(ps, '{')) {
            ps->i++;
            v = hex_run(ps, 1, 8);
            if (v < 0 || !at(ps, '}'))
                return refuse(ps, "bad \\x{..}");
            ps->i++;
            return v;
        }
        /* a byte: beyond ASCII, Oniguruma takes it for part of a UTF-8 sequence (and fails) */
        if ((v = hex_run(ps, 1, 2)) < 0 || v >= 0x80)
            return refuse(ps, "a \\x byte beyond ASCII");
        return v;
    }
    case 'u': {
        int64_t v = hex_run(ps, 4, 4);
        return v < 0 ? refuse(ps, "bad \\u") : v;
    }
    default:
        /* escaped punctuation (and any character beyond ASCII) stands for itself */
        if ((e >= '0' && e <= '9') || ((e | 0x20) >= 'a' && (e | 0x20) <= 'z'))
            return refuse(ps, "an escape not supported");
        return e;
    }
}

static int posix_class(Parser *ps, Class *cl) {
    static const struct {
        const char *name;
        uint32_t flags, gcs;
    } names[] = {
        {"alpha", U_ALPHA, 0}, {"alnum", U_ALNUM, 0}, {"digit", 0, 1u << U_GC_Nd}, {"punct", U_PUNCT, 0},
        {"space", U_SPACE, 0}, {"upper", U_UPPER, 0}, {"lower", U_LOWER, 0}, {"xdigit", U_XDIGIT, 0},
        {"word", U_POSIX_WORD, 0}, {"ascii", 0, 0},
    };
    size_t start = ps->i + 2, end = start;
    int neg = 0;
    if (end < ps->n && ps->p[end] == '^') {
        neg = 1;
        start = ++end;
    }
    char key[8];
    size_t k = 0;
    while (end < ps->n && ps->p[end] >= 'a' && ps->p[end] <= 'z' && k + 1 < sizeof key)
        key[k++] = (char)ps->p[end++];
    key[k] = 0;
    if (end + 1 >= ps->n || ps->p[end] != ':' || ps->p[end + 1] != ']')
        return refuse(ps, "a POSIX bracket not supported");
    for (size_t j = 0; j < sizeof names / sizeof *names; j++) {
        if (strcmp(key, names[j].name) != 0)
            continue;
        ps->i = end + 2;
        if (!names[j].flags && !names[j].gcs) {
            if (neg)
                return refuse(ps, "[:^ascii:]");
            return class_range(cl, 0, 0x7F) ? refuse(ps, "out of memory") : 0;
        }
        if (!neg) {
            cl->flags |= names[j].flags;
            cl->gcs |= names[j].gcs;
            return 0;
        }
        if (cl->nneg == sizeof cl->neg / sizeof *cl->neg)
            return refuse(ps, "too many negated items in a class");
        cl->neg[cl->nneg].flags = names[j].flags;
        cl->neg[cl->nneg++].gcs = names[j].gcs;
        return 0;
    }
    return refuse(ps, "a POSIX bracket not supported");
}

/* The items of a bracket class from i (after '[' and any '^') to its ']', added to cl. */
static int class_items(Parser *ps, Class *cl) {
    if (at(ps, ']'))
        return refuse(ps, "a class starting with ']'");
    int first = 1;
    while (ps->i < ps->n) {
        uint32_t c = ps->p[ps->i];
        if (c == ']') {
            ps->i++;
            return 0;
        }
        if (c == '&' && ps->i + 1 < ps->n && ps->p[ps->i + 1] == '&')
            return refuse(ps, "class intersection");
        if (c == '[') {
            if (ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':') {
                if (ps->fold)
                    return refuse(ps, "a POSIX bracket under (?i)");
                if (posix_class(ps, cl) < 0)
                    return -1;
            } else {
                ps->i++;
                if (at(ps, '^'))
                    return refuse(ps, "a negated nested class");
                if (++ps->depth > 32)
                    return refuse(ps, "classes nested too deep");
                if (class_items(ps, cl) < 0)
                    return -1;
                ps->depth--;
            }
            first = 0;
            continue;
        }
        int64_t lo;
        if (c == '\\') {
            ps->i++;
            if (ps->i == ps->n)
                return refuse(ps, "a trailing backslash");
            int r = class_escape(ps, cl, 0);
            if (r < 0)
                return -1;
            if (r && ps->fold)
                return refuse(ps, "a class escape under (?i)");
            if (r) {
                if (at(ps, '-') && !(ps->i + 1 < ps->n && ps->p[ps->i + 1] == ']'))
                    return refuse(ps, "a range from a class");
                first = 0;
                continue;
            }
            if (ps->p[ps->i] == 'b')
                return refuse(ps, "\\b in a class");
            if ((lo = char_escape(ps)) < 0)
                return -1;
        } else if (c == '-' && !first && !(ps->i + 1 < ps->n && ps->p[ps->i + 1] == ']')) {
            return refuse(ps, "a '-' that is no range");
        } else {
            lo = c;
            ps->i++;
        }
        int64_t hi = lo;
        if (at(ps, '-') && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
            ps->i++;
            uint32_t d = ps->p[ps->i];
            if (d == '[')
                return refuse(ps, "a range to a class");
            if (d == '\\') {
                ps->i++;
                if (ps->i == ps->n)
                    return refuse(ps, "a trailing backslash");
                uint32_t k = ps->p[ps->i] | 0x20;
                if (k == 'd' || k == 'w' || k == 's' || k == 'h' || k == 'p' || k == 'b')
                    return refuse(ps, "a range to a class");
                if ((hi = char_escape(ps)) < 0)
                    return -1;
            } else {
                hi = d;
                ps->i++;
            }
            if (hi < lo)
                return refuse(ps, "an empty range");
        }
        if (ps->fold && hi >= 0x80)
            return refuse(ps, "a character beyond ASCII under (?i)");
        if (class_range(cl, (uint32_t)lo, (uint32_t)hi))
            return refuse(ps, "out of memory");
        first = 0;
    }
    return refuse(ps, "an unterminated class");
}

static int parse_alt(Parser *ps);

static int is_letter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

/* A literal character; under (?i) an ASCII letter becomes the class of its case folding. */
static int char_node(Parser *ps, uint32_t c) {
    if (ps->fold && c >= 0x80)
        return refuse(ps, "a character beyond ASCII under (?i)");
    if (!ps->fold || !is_letter(c)) {
        int k = node_new(ps, N_CHAR);
        if (k >= 0) {
            ps->nodes[k].x = c;
            ps->nodes[k].minlen = 1;
        }
        return k;
    }
    int index;
    Class *cl = class_new(ps, &index);
    uint32_t lower = c | 0x20;
    if (!cl || class_range(cl, lower, lower) || class_range(cl, lower & ~0x20u, lower & ~0x20u) ||
        (lower == 's' && class_range(cl, 0x17F, 0x17F)) || (lower == 'k' && class_range(cl, 0x212A, 0x212A)))
        return refuse(ps, "out of memory");
    class_seal(cl);
    int k = set_node(ps, index);
    if (k >= 0) {
        ps->nodes[k].fstart = lower == 's' || lower == 't' || lower == 'f' || lower == 'i' || lower == 'l';
        ps->nodes[k].fend = lower == 's' || lower == 'f';
    }
    return k;
}

/* The case folding of a class under (?i) (ASCII characters only, see char_node): each letter's
 * other case, U+017F with s, U+212A with k; a negated class is negated after (as Oniguruma:
 * (?i:[^s]) matches none of s S U+017F). Classes of ASCII characters take no part in the
 * multi-character foldings: Oniguruma's (?i:[s]s), (?i:s[s]), (?i:[a-z]+), (?i:[f]i) match
 * none of U+00DF U+1E9E U+FB00-U+FB06. */
static int class_fold(Parser *ps, int index) {
    Class *cl = &ps->classes[index];
    uint32_t letters[4] = {0};
    for (size_t k = 0; k < cl->nranges; k++)
        for (uint32_t c = cl->ranges[k].lo; c <= cl->ranges[k].hi; c++)
            if (is_letter(c))
                letters[(c | 0x20) >> 5] |= 1u << ((c | 0x20) & 31);
    for (uint32_t c = 'a'; c <= 'z'; c++) {
        if (!(letters[c >> 5] >> (c & 31) & 1))
            continue;
        if (class_range(cl, c, c) || class_range(cl, c & ~0x20u, c & ~0x20u) ||
            (c == 's' && class_range(cl, 0x17F, 0x17F)) || (c == 'k' && class_range(cl, 0x212A, 0x212A)))
            return refuse(ps, "out of memory");
    }
    return 0;
}

static int parse_atom(Parser *ps) {
    uint32_t c = ps->p[ps->i];
    int k;
    switch (c) {
    case '(': {
        ps->i++;
        if (++ps->depth > 64)
            return refuse(ps, "groups nested too deep");
        int fold = ps->fold, look = -1;
        if (at(ps, '?')) {
            ps->i++;
            if (at(ps, ':')) {
                ps->i++;
            } else if (at(ps, '=') || at(ps, '!')) {
                look = at(ps, '!');
                ps->i++;
            } else if (at(ps, 'i') && ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':') {
                ps->i += 2;
                ps->fold = 1;
            } else {
                return refuse(ps, "a group kind not supported");
            }
        }
        int body = parse_alt(ps);
        ps->fold = fold;
        if (body < 0)
            return -1;
        if (!at(ps, ')'))
            return refuse(ps, "an unterminated group");
        ps->i++;
        ps->depth--;
        if (look < 0)
            return body;
        if ((k = node_new(ps, N_LOOK)) < 0)
            return -1;
        ps->nodes[k].x = (uint32_t)look;
        ps->nodes[k].child = body;
        return k;
    }
    case '[': {
        ps->i++;
        int index;
        Class *cl = class_new(ps, &index);
        if (!cl)
            return -1;
        if (at(ps, '^')) {
            ps->i++;
            cl->negate = 1;
        }
        if (class_items(ps, &ps->classes[index]) < 0 || (ps->fold && class_fold(ps, index) < 0))
            return -1;
        class_seal(&ps->classes[index]);
        return set_node(ps, index);
    }
    case '.': {
        ps->i++;
        int index;
        Class *cl = class_new(ps, &index);
        if (!cl || class_range(cl, '\n', '\n'))
            return refuse(ps, "out of memory");
        cl->negate = 1;
        class_seal(cl);
        return set_node(ps, index);
    }
    case '^':
    case '$':
        ps->i++;
        if ((k = node_new(ps, N_ASSERT)) >= 0)
            ps->nodes[k].x = c == '^' ? A_BOL : A_EOL;
        return k;
    case '\\': {
        ps->i++;
        if (ps->i == ps->n)
            return refuse(ps, "a trailing backslash");
        uint32_t e = ps->p[ps->i];
        if (e == 'A' || e == 'z' || e == 'Z') {
            ps->i++;
            if ((k = node_new(ps, N_ASSERT)) >= 0)
                ps->nodes[k].x = e == 'A' ? A_BEGIN : e == 'z' ? A_END : A_SEMI_END;
            return k;
        }
        uint32_t lower = e | 0x20;
        if (lower == 'd' || lower == 'w' || lower == 's' || lower == 'h' || lower == 'p') {
            if (ps->fold)
                return refuse(ps, "a class under (?i)");
            int index;
            if (!class_new(ps, &index))
                return -1;
            if (class_escape(ps, &ps->classes[index], 1) < 0)
                return -1;
            class_seal(&ps->classes[index]);
            return set_node(ps, index);
        }
        int64_t v = char_escape(ps);
        return v < 0 ? -1 : char_node(ps, (uint32_t)v);
    }
    case '*':
    case '+':
    case '?':
    case '{':
        return refuse(ps, "a quantifier with nothing to repeat");
    default:
        ps->i++;
        return char_node(ps, c);
    }
}

/* A count in an interval: digits, or -1 when there are none. */
static int64_t count(Parser *ps) {
    int64_t v = -1;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (ps->p[ps->i++] - '0');
        if (v > MAX_COUNT)
            return refuse(ps, "a count too large");
    }
    return v;
}

/* A quantifier at i, if any: sets *lo, *hi and returns 1 (2 for an interval); 0 for none; -1 refused. */
static int quantifier(Parser *ps, uint32_t *lo, uint32_t *hi) {
    if (ps->i == ps->n)
        return 0;
    switch (ps->p[ps->i]) {
    case '*':
        *lo = 0, *hi = UNBOUNDED;
        break;
    case '+':
        *lo = 1, *hi = UNBOUNDED;
        break;
    case '?':
        *lo = 0, *hi = 1;
        break;
    case '{': {
        ps->i++;
        int64_t a = count(ps), b = a;
        if (ps->err)
            return -1;
        if (at(ps, ',')) {
            ps->i++;
            b = count(ps);
            if (ps->err)
                return -1;
            if (a < 0)
                a = 0;
            else if (b < 0)
                b = UNBOUNDED;
        }
        if (a < 0 || b < 0 || !at(ps, '}') || b < a)
            return refuse(ps, "a brace that is no interval");
        *lo = (uint32_t)a, *hi = (uint32_t)b;
        ps->i++;
        return 2;
    }
    default:
        return 0;
    }
    ps->i++;
    return 1;
}

static int parse_cat(Parser *ps) {
    int cat = node_new(ps, N_CAT), last = -1;
    if (cat < 0)
        return -1;
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        int atom = parse_atom(ps);
        if (atom < 0)
            return -1;
        uint32_t lo, hi;
        int q = quantifier(ps, &lo, &hi);
        if (q < 0)
            return -1;
        if (q) {
            Node *a = &ps->nodes[atom];
            if (a->minlen == 0)
                return refuse(ps, "a quantifier on what may match the empty string");
            if (hi > 1 && a->fstart && a->fend)
                return refuse(ps, "a repeat of a folded s or f");
            if (a->type == N_CHAR) {
                /* a character repeated: a class of one, which a run tests */
                int index;
                Class *cl = class_new(ps, &index);
                if (!cl || class_range(cl, ps->nodes[atom].x, ps->nodes[atom].x))
                    return refuse(ps, "out of memory");
                class_seal(cl);
                a = &ps->nodes[atom];
                a->type = N_SET;
                a->x = (uint32_t)index;
            }
            /* Ruby's possessive ?+ *+ ++ (not after an interval: x{2}+ repeats x{2}), taken on a
             * single character only, as a run that gives nothing back */
            int possessive = q == 1 && at(ps, '+') && a->type == N_SET;
            if (possessive)
                ps->i++;
            if (ps->i < ps->n && (ps->p[ps->i] == '?' || ps->p[ps->i] == '+' || ps->p[ps->i] == '*' ||
                                  ps->p[ps->i] == '{'))
                return refuse(ps, "a lazy, possessive or repeated quantifier");
            int rep = node_new(ps, N_REP);
            if (rep < 0)
                return -1;
            a = &ps->nodes[atom];
            uint64_t len = (uint64_t)a->minlen * lo;
            ps->nodes[rep] = (Node){.type = N_REP, .x = (uint32_t)possessive, .min = lo, .max = hi,
                                    .child = atom, .next = -1,
                                    .minlen = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len,
                                    .fstart = a->fstart, .fend = a->fend};
            atom = rep;
        }
        Node *c = &ps->nodes[cat], *a = &ps->nodes[atom];
        if (last >= 0) {
            if (ps->nodes[last].fend && a->fstart)
                return refuse(ps, "a folded s or f before s t f i or l");
            ps->nodes[last].next = atom;
        } else {
            c->child = atom;
        }
        uint64_t len = (uint64_t)c->minlen + a->minlen;
        /* a folded end shows through what matches nothing after it */
        c->fend = a->fend || (a->minlen == 0 && c->fend);
        if (c->minlen == 0)
            c->fstart |= a->fstart;
        c->minlen = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
        if (a->minlen == 0 && last >= 0 && ps->nodes[last].fend)
            a->fend = 1;
        last = atom;
    }
    return cat;
}

static int parse_alt(Parser *ps) {
    int first = parse_cat(ps);
    if (first < 0 || !at(ps, '|'))
        return first;
    int alt = node_new(ps, N_ALT);
    if (alt < 0)
        return -1;
    Node *n = &ps->nodes[alt];
    n->child = first;
    n->minlen = ps->nodes[first].minlen;
    n->fstart = ps->nodes[first].fstart;
    n->fend = ps->nodes[first].fend;
    int last = first;
    while (at(ps, '|')) {
        ps->i++;
        int k = parse_cat(ps);
        if (k < 0)
            return -1;
        ps->nodes[last].next = k;
        last = k;
        n = &ps->nodes[alt];
        Node *b = &ps->nodes[k];
        n->minlen = b->minlen < n->minlen ? b->minlen : n->minlen;
        n->fstart |= b->fstart;
        n->fend |= b->fend;
    }
    return alt;
}

/* ---- code generation --------------------------------------------------------------------- */

typedef struct {
    Inst *code;
    size_t n, cap;
    const Node *nodes;
    const Class *classes;
} Emitter;

static int emit(Emitter *em, Inst in) {
    if (em->n == MAX_CODE)
        return -1;
    if (em->n == em->cap) {
        size_t cap = em->cap ? em->cap * 2 : 64;
        Inst *v = realloc(em->code, cap * sizeof *v);
        if (!v)
            return -1;
        em->code = v;
        em->cap = cap;
    }
    em->code[em->n] = in;
    return (int)em->n++;
}

/* The ASCII characters a node's match may start with, into f; whether it may start with a
 * character beyond ASCII or match the empty string is not told (callers test minlen). */
static void first_chars(const Emitter *em, int k, uint32_t f[4]) {
    const Node *nd = &em->nodes[k];
    switch (nd->type) {
    case N_CHAR:
        if (nd->x < 0x80)
            f[nd->x >> 5] |= 1u << (nd->x & 31);
        return;
    case N_SET:
        for (int j = 0; j < 4; j++)
            f[j] |= em->classes[nd->x].ascii[j];
        return;
    case N_CAT:
        for (int c = nd->child; c >= 0; c = em->nodes[c].next) {
            first_chars(em, c, f);
            if (em->nodes[c].minlen)
                return;
        }
        return;
    case N_ALT:
        for (int c = nd->child; c >= 0; c = em->nodes[c].next)
            first_chars(em, c, f);
        return;
    case N_REP:
        first_chars(em, nd->child, f);
        return;
    default: /* lookaheads and anchors consume nothing: the next node's characters decide */
        return;
    }
}

static int emit_node(Emitter *em, int k);

/* Points every instruction of a chain (linked through x, ending in UINT32_MAX) at the next one
 * to be emitted. */
static void patch_chain(Emitter *em, uint32_t chain) {
    while (chain != UINT32_MAX) {
        uint32_t prev = em->code[chain].x;
        em->code[chain].x = (uint32_t)em->n;
        chain = prev;
    }
}

static int emit_split(Emitter *em, int branch) {
    Inst in = {.op = OP_SPLIT};
    if (branch >= 0 && em->nodes[branch].minlen) {
        in.filter = 1;
        first_chars(em, branch, in.first);
    }
    return emit(em, in);
}

static int emit_node(Emitter *em, int k) {
    const Node *nd = &em->nodes[k];
    switch (nd->type) {
    case N_CHAR:
        return emit(em, (Inst){.op = OP_CHAR, .x = nd->x}) < 0 ? -1 : 0;
    case N_SET:
        return emit(em, (Inst){.op = OP_SET, .x = nd->x}) < 0 ? -1 : 0;
    case N_ASSERT:
        return emit(em, (Inst){.op = OP_ASSERT, .x = nd->x}) < 0 ? -1 : 0;
    case N_CAT:
        for (int c = nd->child; c >= 0; c = em->nodes[c].next)
            if (emit_node(em, c) < 0)
                return -1;
        return 0;
    case N_ALT: {
        /* each alternative but the last: SPLIT to the next one, the alternative, JMP to the end;
         * the JMPs are chained through x until the end is known */
        uint32_t chain = UINT32_MAX;
        for (int c = nd->child; c >= 0; c = em->nodes[c].next) {
            if (em->nodes[c].next < 0) {
                if (emit_node(em, c) < 0)
                    return -1;
                break;
            }
            int split = emit_split(em, c), jump;
            if (split < 0 || emit_node(em, c) < 0 || (jump = emit(em, (Inst){.op = OP_JMP, .x = chain})) < 0)
                return -1;
            chain = (uint32_t)jump;
            em->code[split].x = (uint32_t)em->n;
        }
        patch_chain(em, chain);
        return 0;
    }
    case N_LOOK: {
        int look = emit(em, (Inst){.op = OP_LOOK, .neg = (uint8_t)nd->x});
        if (look < 0 || emit_node(em, nd->child) < 0 || emit(em, (Inst){.op = OP_MATCH}) < 0)
            return -1;
        em->code[look].x = (uint32_t)em->n;
        return 0;
    }
    case N_REP: {
        if (em->nodes[nd->child].type == N_SET)
            return emit(em, (Inst){.op = OP_RUN, .neg = (uint8_t)nd->x, .x = em->nodes[nd->child].x, .min = nd->min,
                                   .max = nd->max}) < 0
                       ? -1
                       : 0;
        for (uint32_t j = 0; j < nd->min; j++)
            if (emit_node(em, nd->child) < 0)
                return -1;
        if (nd->max == UNBOUNDED) {
            /* loop: SPLIT past the end, the body, JMP back to the SPLIT */
            int split = emit_split(em, nd->child);
            if (split < 0 || emit_node(em, nd->child) < 0 ||
                emit(em, (Inst){.op = OP_JMP, .x = (uint32_t)split}) < 0)
                return -1;
            em->code[split].x = (uint32_t)em->n;
            return 0;
        }
        /* (body(body(...)?)?)?: each optional copy SPLITs past all the rest; the copies' SPLITs
         * are chained through x until the end is known */
        uint32_t chain = UINT32_MAX;
        for (uint32_t j = nd->min; j < nd->max; j++) {
            int split = emit_split(em, nd->child);
            if (split < 0)
                return -1;
            em->code[split].x = chain;
            chain = (uint32_t)split;
            if (emit_node(em, nd->child) < 0)
                return -1;
        }
        patch_chain(em, chain);
        return 0;
    }
    }
    return -1;
}

static void classes_free(Class *classes, size_t n) {
    for (size_t k = 0; k < n; k++)
        free(classes[k].ranges);
    free(classes);
}

void regex_free(Regex *re) {
    if (!re)
        return;
    free(re->code);
    classes_free(re->classes, re->nclasses);
    free(re);
}

Regex *regex_compile(const uint32_t *pattern, size_t n, const char **why) {
    Parser ps = {.p = pattern, .n = n};
    Emitter em = {0};
    Regex *re = NULL;
    int root = parse_alt(&ps);
    if (root >= 0 && ps.i < ps.n)
        refuse(&ps, "an unmatched ')'");
    if (root >= 0 && !ps.err && ps.nodes[root].minlen == 0)
        refuse(&ps, "a pattern that may match the empty string");
    if (!ps.err) {
        em.nodes = ps.nodes;
        em.classes = ps.classes;
        if (emit_node(&em, root) < 0 || emit(&em, (Inst){.op = OP_MATCH}) < 0)
            refuse(&ps, "a pattern too long");
    }
    if (!ps.err && !(re = calloc(1, sizeof *re)))
        refuse(&ps, "out of memory");
    if (ps.err) {
        *why = ps.err;
        free(ps.nodes);
        free(em.code);
        classes_free(ps.classes, ps.nclasses);
        return NULL;
    }
    first_chars(&em, root, re->first);
    re->code = em.code;
    re->classes = ps.classes;
    re->nclasses = ps.nclasses;
    free(ps.nodes);
    return re;
}

/* ---- matching ------------------------------------------------------------------------------ */

/* A point to come back to: resume at pc from position i (lo == SIZE_MAX), or a greedy run's
 * next shorter length: resume at pc from i - 1, while that is at least lo. */
struct RegexFrame {
    uint32_t pc;
    size_t i, lo;
};

static int push(RegexStack *st, uint32_t pc, size_t i, size_t lo) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        RegexFrame *v = realloc(st->v, cap * sizeof *v);
        if (!v)
            return -1;
        st->v = v;
        st->cap = cap;
    }
    st->v[st->n++] = (RegexFrame){pc, i, lo};
    return 0;
}

static inline int in_first(const uint32_t f[4], uint32_t c) { return f[c >> 5] >> (c & 31) & 1; }

/* Ruby's anchors: ^ after a newline but not at the end, $ before a newline or at the end. */
static int anchor_holds(uint32_t kind, const uint32_t *s, size_t n, size_t i) {
    switch (kind) {
    case A_BOL:
        return i == 0 || (s[i - 1] == '\n' && i < n);
    case A_EOL:
        return i == n || s[i] == '\n';
    case A_BEGIN:
        return i == 0;
    case A_END:
        return i == n;
    default: /* A_SEMI_END */
        return i == n || (i + 1 == n && s[i] == '\n');
    }
}

/* Runs the program from pc at position i; the end of the match (at the OP_MATCH reached), or
 * REGEX_NONE / REGEX_NOMEM. The frames it pushes are gone when it returns. */
static size_t run(const Regex *re, uint32_t pc, const uint32_t *s, size_t n, size_t i, RegexStack *st) {
    size_t base = st->n;
    for (;;) {
        const Inst *in = &re->code[pc];
        switch (in->op) {
        case OP_CHAR:
            if (i < n && s[i] == in->x) {
                i++;
                pc++;
                continue;
            }
            break;
        case OP_SET:
            if (i < n && class_has(&re->classes[in->x], s[i])) {
                i++;
                pc++;
                continue;
            }
            break;
        case OP_RUN: {
            const Class *cl = &re->classes[in->x];
            size_t end = in->max == UNBOUNDED || n - i < in->max ? n : i + in->max, e = i;
            while (e < end && class_has(cl, s[e]))
                e++;
            if (e - i < in->min)
                break;
            if (!in->neg && e - i > in->min && push(st, pc + 1, e, i + in->min) < 0)
                return REGEX_NOMEM;
            i = e;
            pc++;
            continue;
        }
        case OP_SPLIT:
            /* the first branch cannot start here: straight to the second, nothing to come back to */
            if (in->filter && (i == n || (s[i] < 0x80 && !in_first(in->first, s[i])))) {
                pc = in->x;
                continue;
            }
            if (push(st, in->x, i, SIZE_MAX) < 0)
                return REGEX_NOMEM;
            pc++;
            continue;
        case OP_JMP:
            pc = in->x;
            continue;
        case OP_ASSERT:
            if (anchor_holds(in->x, s, n, i)) {
                pc++;
                continue;
            }
            break;
        case OP_LOOK: {
            size_t e = run(re, pc + 1, s, n, i, st);
            if (e == REGEX_NOMEM)
                return e;
            if ((e != REGEX_NONE) != in->neg) {
                pc = in->x;
                continue;
            }
            break;
        }
        default: /* OP_MATCH */
            st->n = base;
            return i;
        }
        /* failed: back to the latest frame */
        if (st->n == base)
            return REGEX_NONE;
        RegexFrame *f = &st->v[st->n - 1];
        pc = f->pc;
        if (f->lo == SIZE_MAX) {
            i = f->i;
            st->n--;
        } else {
            i = --f->i;
            if (f->i == f->lo)
                st->n--;
        }
    }
}

size_t regex_match(const Regex *re, const uint32_t *s, size_t n, size_t i, RegexStack *st) {
    if (i == n || (s[i] < 0x80 && !in_first(re->first, s[i])))
        return REGEX_NONE;
    return run(re, 0, s, n, i, st);
}
