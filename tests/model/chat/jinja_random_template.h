// A random Jinja template generator for differential and fuzz testing: statements (if / for /
// set / namespace / macro / call / filter / comments / raw), whitespace control in every
// form, expressions over the snippet variables with operators, filters, tests, methods,
// slices and literals. Deterministic for a seed.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace pagoda::jinja::testing {

class RandomTemplate {
 public:
  explicit RandomTemplate(uint32_t seed) : rng_(seed) {}

  std::string Template() {
    std::string out;
    const int n = Int(1, 6);
    for (int i = 0; i < n; ++i) out += Statement(3);
    return out;
  }

  std::string Expression(int depth) {
    if (depth <= 0) return Atom();
    switch (Int(0, 12)) {
      case 0:
        return Atom();
      case 1:
        return Expression(depth - 1) + " " +
               Pick({"+", "-", "*", "//", "%", "~", "==", "!=", "<", ">", "<=", "in", "not in",
                     "and", "or"}) +
               " " + Expression(depth - 1);
      case 2:
        return Pick({"not ", "-", ""}) + "(" + Expression(depth - 1) + ")";
      case 3:
        return Expression(depth - 1) + "|" + Filter();
      case 4:
        return Expression(depth - 1) + " is " + Pick({"", "not "}) + Test();
      case 5:
        return "(" + Expression(depth - 1) + " if " + Expression(depth - 1) + " else " +
               Expression(depth - 1) + ")";
      case 6:
        return "[" + Expression(depth - 1) + ", " + Atom() + "]";
      case 7:
        return "{" + Quoted() + ": " + Expression(depth - 1) + "}";
      case 8:
        return Pick({"s", "u", "msgs[0].content", "msgs[-1].content", "t"}) + "." + Method();
      case 9:
        return Pick({"l", "s", "u", "msgs", "emoji", "e"}) + Slice();
      case 10:
        return "(" + Expression(depth - 1) + ")|" + Filter() + "|" + Filter();
      default:
        return Access();
    }
  }

  std::string Statement(int depth) {
    const int kind = depth <= 0 ? Int(0, 2) : Int(0, 14);
    switch (kind) {
      case 0:
        return Text();
      case 1:
      case 2:
        return Open("{{") + " " + Expression(2) + " " + Close("}}") + Text();
      case 3:
        return Tag("if " + Expression(2)) + Body(depth) +
               (Int(0, 1) ? Tag("elif " + Expression(1)) + Body(depth) : "") +
               (Int(0, 1) ? Tag("else") + Body(depth) : "") + Tag("endif");
      case 4:
        return Tag("for " + LoopVar() + " in " + Iterable() +
                   (Int(0, 3) == 0 ? " if " + Expression(1) : "")) +
               LoopBody(depth) + (Int(0, 3) == 0 ? Tag("else") + Body(depth) : "") + Tag("endfor");
      case 5:
        return Tag("set " + Pick({"v", "w", "s", "n"}) + " = " + Expression(2)) + Text();
      case 6:
        return Tag("set ns = namespace(c=0, acc=[])") + Tag("for x in " + Iterable()) +
               Tag("set ns.c = ns.c + 1") + Tag("set ns.acc = ns.acc + [x]") + Tag("endfor") +
               "{{ ns.c }}{{ ns.acc }}";
      case 7:
        return Tag("macro mac(a, b=" + Atom() + ")") + "<{{ a }}|{{ b }}>" + Body(depth - 1) +
               Tag("endmacro") + "{{ mac(" + Expression(1) + ") }}{{ mac(" + Atom() +
               ", b=" + Atom() + ") }}";
      case 8:
        return Open("{#") + " comment " + Close("#}") + Text();
      case 9:
        return Tag("filter " +
                   Pick({"upper", "trim", "title", "replace('a', 'b')", "indent(2, true)"})) +
               Body(depth) + Tag("endfilter");
      case 10:
        return Tag("set blk") + Body(depth) + Tag("endset") + "[{{ blk }}]";
      case 11:
        return Tag("macro wrap()") + "(({{ caller() }}))" + Tag("endmacro") + Tag("call wrap()") +
               Body(depth) + Tag("endcall");
      case 12:
        return Tag("raw") + "{{ raw }}" + Text() + Tag("endraw");
      default:
        return Text() + Body(depth);
    }
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::string Pick(std::initializer_list<const char*> options) {
    return std::vector<const char*>(options)[Int(0, static_cast<int>(options.size()) - 1)];
  }

  std::string Body(int depth) {
    std::string out;
    const int n = Int(0, 3);
    for (int i = 0; i < n; ++i) out += Statement(depth - 1);
    return out;
  }

  std::string LoopBody(int depth) {
    std::string out = Body(depth);
    switch (Int(0, 5)) {
      case 0:
        out += "{{ loop.index }}{{ loop.first }}{{ loop.last }}";
        break;
      case 1:
        out += "{{ loop.index0 }}/{{ loop.length }}{{ loop.revindex }}";
        break;
      case 2:
        out += Tag("if loop.index0 == 1") + Tag(Pick({"break", "continue"})) + Tag("endif");
        break;
      default:
        out += "{{ x }}";
    }
    return out;
  }

  // Whitespace control in every form, and the whitespace around tags it acts on.
  std::string Open(const char* tag) { return Pad() + tag + Pick({"", "", "-", "+"}); }
  std::string Close(const char* tag) { return std::string(Pick({"", "", "-"})) + tag + Pad(); }
  std::string Pad() { return Pick({"", "", " ", "\n", "  \n  ", "\t", "\n\n ", " \n"}); }
  std::string Tag(const std::string& body) {
    return Pad() + "{%" + Pick({"", "", "-", "+"}) + " " + body + " " + Pick({"", "", "-", "+"}) +
           "%}" + Pad();
  }
  std::string Text() { return Pick({"", "x", " text ", "\n", "a\n  b\n", "  ", "é{", "}", "\t-"}); }

  std::string Quoted() {
    return Pick({"'a'", "\"b\"", "'Hello'", "' x '", "'é'", "''", "'a,b'", "'\\n'", "'l'",
                 "\"it's\"", "'ß'"});
  }
  std::string Atom() {
    switch (Int(0, 4)) {
      case 0:
        return std::to_string(Int(-3, 12));
      case 1:
        return Pick({"1.5", "0.25", "-2.0", "1e3", "0.1"});
      case 2:
        return Quoted();
      case 3:
        return Pick({"true", "false", "none", "[]", "[1, 2]", "{}", "(1, 'a')"});
      default:
        return Pick({"s", "n", "f", "l", "d", "msgs", "missing", "u", "e", "t", "z", "b", "emoji"});
    }
  }
  std::string Access() {
    return Pick({"d.a", "d['b']", "d.b[1]", "msgs[0].role", "msgs[1]['content']", "l[0]", "l[-1]",
                 "msgs[-1].name", "missing.x", "msgs[9]", "s[0]", "u[1]", "d.zz", "n.x",
                 "msgs|length", "(msgs|first).content"});
  }
  std::string Slice() {
    return Pick(
        {"[1:]", "[:-1]", "[::-1]", "[::2]", "[1:3]", "[-2:]", "[5:]", "[0]", "[-1]", "[:0]"});
  }
  std::string Iterable() {
    return Pick({"l", "s", "d", "msgs", "range(n)", "e", "missing", "d|items", "u",
                 "msgs|selectattr('role', 'equalto', 'user')", "l|reverse", "[1, 'a', none]", "d.b",
                 "range(3, 0, -1)"});
  }
  std::string LoopVar() { return Pick({"x", "x", "k, v", "x"}); }
  std::string Filter() {
    return Pick({"length",
                 "upper",
                 "lower",
                 "trim",
                 "title",
                 "string",
                 "list",
                 "first",
                 "last",
                 "reverse|list",
                 "sort",
                 "join(',')",
                 "tojson",
                 "default('d')",
                 "int",
                 "float",
                 "abs",
                 "unique|list",
                 "items|list",
                 "capitalize",
                 "count",
                 "wordcount",
                 "indent(2)",
                 "replace('l', 'L')",
                 "round",
                 "center(7)",
                 "sum",
                 "min",
                 "max",
                 "dictsort",
                 "tojson(indent=2)",
                 "map('string')|list",
                 "select|list",
                 "reject('none')|list",
                 "map(attribute='role')|list",
                 "batch(2)|list",
                 "trim('x')",
                 "first|default(0)",
                 "truncate(5)"});
  }
  std::string Test() {
    return Pick({"defined",  "none",     "string",         "number",  "mapping",    "iterable",
                 "sequence", "odd",      "even",           "boolean", "integer",    "float",
                 "lower",    "upper",    "divisibleby(2)", "in(l)",   "equalto(1)", "false",
                 "true",     "callable", "undefined"});
  }
  std::string Method() {
    return Pick({"upper()",          "lower()",       "strip()",         "split()",
                 "split(',')",       "split('l', 1)", "startswith('H')", "endswith('d')",
                 "title()",          "capitalize()",  "lstrip('H')",     "rstrip()",
                 "replace('l', '')", "find('o')",     "count('l')",      "rsplit(' ', 1)",
                 "isalpha()",        "zfill(12)",     "center(15, '*')", "splitlines()",
                 "partition(' ')",   "format(1)",     "isdigit()",       "islower()"});
  }

  std::mt19937 rng_;
};

}  // namespace pagoda::jinja::testing
