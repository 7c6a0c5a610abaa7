// Unit tests per construct: statements, scoping, macros, whitespace control, literals,
// operators, access, tests, filters, tojson, methods, globals and undefined semantics. The
// expectations were produced by Python jinja2 with transformers' settings.
#include <gtest/gtest.h>

#include <string>

#include "model/chat/jinja.h"

namespace pagoda::jinja {
namespace {

struct ConstructCase {
  const char* group;
  const char* source;
  const char* expected;
};

const ConstructCase kCases[] = {
    {"Statements", "{% if n > 2 %}big{% elif n > 1 %}mid{% else %}small{% endif %}", "big"},
    {"Statements", "{% if n > 5 %}big{% elif n > 1 %}mid{% else %}small{% endif %}", "mid"},
    {"Statements", "{% if false %}x{% endif %}|{% if [] %}x{% else %}empty{% endif %}", "|empty"},
    {"Statements", "{% for x in items %}{{ x }}{% endfor %}", "312"},
    {"Statements",
     "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ "
     "loop.length }}{{ loop.revindex }};{% endfor %}",
     "10TrueFalse33;21FalseFalse32;32FalseTrue31;"},
    {"Statements",
     "{% for x in items %}{{ loop.previtem }}>{{ x }}>{{ loop.nextitem }} {% endfor %}",
     ">3>1 3>1>2 1>2> "},
    {"Statements", "{% for x in items if x > 1 %}{{ x }}{{ loop.last }} {% endfor %}",
     "3False 2True "},
    {"Statements", "{% for x in [] %}x{% else %}none{% endfor %}", "none"},
    {"Statements", "{% for k, v in d|items %}{{ k }}={{ v }} {% endfor %}", "b=2 a=1 "},
    {"Statements", "{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}", "b=2 a=1 "},
    {"Statements",
     "{% for x in items %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% "
     "endif %}{{ x }}{% endfor %}",
     "3"},
    {"Statements",
     "{% for a in [1, 2] %}{% for b in [1, 2] %}{{ loop.index }}{% endfor %}/{{ loop.index }} {% "
     "endfor %}",
     "12/1 12/2 "},
    {"Statements", "{% for c in 'abc' %}{{ c }}-{% endfor %}", "a-b-c-"},
    {"Statements", "{% for m in msgs[1:] %}{{ m.role }} {% endfor %}", "user assistant user "},
    {"Statements", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}", "12"},
    {"Statements", "{% set a, b = [1, 2] %}{{ b }}{{ a }}", "21"},
    {"Statements", "{% set x %}{{ name }}!{% endset %}[{{ x }}]", "[Ann!]"},
    {"Statements", "{% set x | upper %}{{ name }}{% endset %}{{ x }}", "ANN"},
    {"Statements", "{% filter upper %}hi {{ name }}{% endfilter %}", "HI ANN"},
    {"Statements", "{% with a = 2, b = 3 %}{{ a * b }}{% endwith %}{{ a }}", "6"},
    {"Statements", "{% generation %}gen {{ n }}{% endgeneration %}", "gen 3"},
    {"Statements", "{% print name ~ '!' %}", "Ann!"},
    {"Scoping",
     "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}",
     "inner outer"},
    {"Scoping", "{% if true %}{% set x = 'set in if' %}{% endif %}{{ x }}", "set in if"},
    {"Scoping",
     "{% set ns = namespace(total=0) %}{% for i in items %}{% set ns.total = ns.total + i %}{% "
     "endfor %}{{ ns.total }}",
     "6"},
    {"Scoping",
     "{% set ns = namespace(found=false, first='') %}{% for m in msgs %}{% if m.role == 'user' and "
     "not ns.found %}{% set ns.found = true %}{% set ns.first = m.content %}{% endif %}{% endfor "
     "%}{{ ns.first }}",
     "Hi"},
    {"Scoping", "{% set msgs = msgs[1:] %}{{ msgs|length }}", "3"},
    {"Scoping", "{% for m in msgs %}{% set m = m.role %}{{ m }} {% endfor %}",
     "system user assistant user "},
    {"Scoping",
     "{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% for i in [1] %}{% set x = 2 "
     "%}{{ m() }}{% endfor %}",
     "11"},
    {"Scoping", "{% for i in [1] %}[{{ name }}]{% endfor %}{% set name = 'late' %}{{ name }}",
     "[]late"},
    {"Scoping",
     "{% set y = 0 %}{% for i in [1, 2] %}{{ y }}{% set y = 5 %}{{ y }}{% endfor %}{{ y }}",
     "05050"},
    {"Macros",
     "{% macro greet(who, greeting='Hello') %}{{ greeting }}, {{ who }}!{% endmacro %}{{ "
     "greet(name) }} {{ greet('Bob', greeting='Hi') }} {{ greet(greeting='Yo', who='Cy') }}",
     "Hello, Ann! Hi, Bob! Yo, Cy!"},
    {"Macros",
     "{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}",
     "1|(2, 3)|{'x': 4}"},
    {"Macros", "{% macro m(a, b) %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}", "[1]"},
    {"Macros",
     "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro "
     "%}{{ fact(5) }}",
     "120"},
    {"Macros", "{% macro t(x) %}{{ x|upper }}{% endmacro %}{{ '[' + t('a') + ']' }}", "[A]"},
    {"Macros",
     "{% macro box() %}<{{ caller() }}>{% endmacro %}{% call box() %}inner {{ name }}{% endcall %}",
     "<inner Ann>"},
    {"Macros",
     "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) "
     "each(items) %}({{ v }}){% endcall %}",
     "(3)(1)(2)"},
    {"Whitespace", "a\n{% if true %}\nb\n{% endif %}\nc", "a\nb\nc"},
    {"Whitespace", "a\n    {% if true %}\n    b\n    {% endif %}\nc", "a\n    b\nc"},
    {"Whitespace", "a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
    {"Whitespace", "a\n  {{ name }}\n  {{- name -}}\n  b", "a\n  AnnAnnb"},
    {"Whitespace", "a\n  {%+ if true %}b{% endif %}", "a\n  b"},
    {"Whitespace", "{% if true +%}\nb{% endif %}", "\nb"},
    {"Whitespace", "x\n{# a comment #}\ny {#- tight -#} z", "x\nyz"},
    {"Whitespace", "{% raw %}{{ not a tag }}{% endraw %}", "{{ not a tag }}"},
    {"Whitespace", "  {%- raw -%}  {{ x }}  {%- endraw -%}  !", "{{ x }}!"},
    {"Whitespace", "ends with newline\n", "ends with newline"},
    {"Whitespace", "\r\nwindows\r\nnewlines\r\n", "\nwindows\nnewlines"},
    {"Literals",
     "{{ 42 }}|{{ -7 }}|{{ 3.0 }}|{{ 1e3 }}|{{ 0.1 }}|{{ 1_000 }}|{{ 0x1f }}|{{ true }}|{{ False "
     "}}|{{ none }}|{{ None }}",
     "42|-7|3.0|1000.0|0.1|1000|31|True|False|None|None"},
    {"Literals",
     "{{ 'single' }}|{{ \"double\" }}|{{ 'it\\'s' }}|{{ \"a\\nb\" }}|{{ 'tab\\tend' }}|{{ "
     "'\\u00e9\\x41' }}|{{ 'x' 'y' }}",
     "single|double|it's|a\nb|tab\tend|éA|xy"},
    {"Literals",
     "{{ [1, 'a', none, true] }}|{{ (1, 2) }}|{{ (1,) }}|{{ {'k': 'v', 'n': [1]} }}|{{ [] }}|{{ {} "
     "}}",
     "[1, 'a', None, True]|(1, 2)|(1,)|{'k': 'v', 'n': [1]}|[]|{}"},
    {"Operators",
     "{{ 7 + 3 }}|{{ 7 - 3 }}|{{ 7 * 3 }}|{{ 7 / 2 }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 8 }}|{{ -7 "
     "// 2 }}|{{ -7 % 3 }}",
     "10|4|21|3.5|3|1|256|-4|2"},
    {"Operators",
     "{{ 'a' + 'b' }}|{{ 'ab' * 2 }}|{{ [1] + [2] }}|{{ 'n=' ~ n ~ none }}|{{ 1 + 0.5 }}|{{ true + "
     "true }}",
     "ab|abab|[1, 2]|n=3None|1.5|2"},
    {"Operators",
     "{{ 1 == 1.0 }}|{{ 'a' != 'b' }}|{{ 2 < 3 }}|{{ 3 <= 2 }}|{{ 'b' > 'a' }}|{{ 1 < 2 < 3 }}|{{ "
     "d == {'a': 1, 'b': 2} }}",
     "True|True|True|False|True|True|True"},
    {"Operators",
     "{{ 'i' in 'Hi' }}|{{ 2 in items }}|{{ 'a' in d }}|{{ 'z' not in d }}|{{ 'x' in missing }}",
     "True|True|True|True|False"},
    {"Operators",
     "{{ not n }}|{{ n and 'yes' }}|{{ 0 or 'fallback' }}|{{ none or [] }}|{{ 'a' if n > 1 else "
     "'b' }}|{{ 'shown' if false }}.",
     "False|yes|fallback|[]|a|."},
    {"Access",
     "{{ d.a }}|{{ d['b'] }}|{{ d.zz }}|{{ msgs[0].role }}|{{ msgs[-1]['content'] }}|{{ "
     "msgs.1.content }}|{{ items[10] }}",
     "1|2||system|Bye|Hi|"},
    {"Access",
     "{{ items[1:] }}|{{ items[:-1] }}|{{ items[::-1] }}|{{ items[::2] }}|{{ name[1:] }}|{{ "
     "name[::-1] }}|{{ 'héllo'[1] }}",
     "[1, 2]|[3, 1]|[2, 1, 3]|[3, 2]|nn|nnA|é"},
    {"Access",
     "{{ d.items is defined }}|{{ d['items'] is defined }}|{{ d.get('a') }}|{{ d.get('z', 0) }}|{{ "
     "d.keys()|list }}|{{ d.values()|list }}",
     "True|True|1|0|['b', 'a']|[2, 1]"},
    {"Tests",
     "{{ n is defined }}|{{ zz is defined }}|{{ zz is undefined }}|{{ none is none }}|{{ name is "
     "string }}|{{ n is string }}|{{ d is mapping }}|{{ items is mapping }}",
     "True|False|True|True|True|False|True|False"},
    {"Tests",
     "{{ items is iterable }}|{{ name is iterable }}|{{ n is iterable }}|{{ n is number }}|{{ 1.5 "
     "is float }}|{{ n is integer }}|{{ true is boolean }}|{{ false is false }}|{{ true is true }}",
     "True|True|False|True|True|True|True|True|True"},
    {"Tests",
     "{{ items is sequence }}|{{ n is odd }}|{{ n is even }}|{{ 9 is divisibleby 3 }}|{{ 2 is in "
     "items }}|{{ n is equalto 3 }}|{{ n is gt 2 }}|{{ 'ab' is lower }}|{{ 'AB' is upper }}",
     "True|True|False|True|True|True|True|True|True"},
    {"Tests",
     "{{ n is not none }}|{{ not n is none }}|{{ zz is not defined }}|{{ range is callable }}|{{ "
     "items is sameas items }}",
     "True|True|True|True|True"},
    {"Filters",
     "{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ name|length }}|{{ items|length }}|{{ "
     "d|count }}|{{ zz|length }}",
     "pad|hi|3|3|2|0"},
    {"Filters",
     "{{ name|upper }}|{{ name|lower }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ "
     "'a-b'|replace('-', '+') }}",
     "ANN|ann|Hello World|Hello|a+b"},
    {"Filters",
     "{{ items|join(', ') }}|{{ items|first }}|{{ items|last }}|{{ items|sort }}|{{ "
     "items|sort(reverse=true) }}|{{ items|reverse|list }}|{{ items|sum }}|{{ items|min }}|{{ "
     "items|max }}",
     "3, 1, 2|3|2|[1, 2, 3]|[3, 2, 1]|[2, 1, 3]|6|1|3"},
    {"Filters",
     "{{ zz|default('dflt') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}|{{ name|d('x') "
     "}}",
     "dflt|e|None|Ann"},
    {"Filters",
     "{{ d|items|list }}|{{ d|dictsort }}|{{ d|list }}|{{ 'ab'|list }}|{{ [1, 1, 2]|unique|list "
     "}}|{{ items|string }}",
     "[('b', 2), ('a', 1)]|[('a', 1), ('b', 2)]|['b', 'a']|['a', 'b']|[1, 2]|[3, 1, 2]"},
    {"Filters",
     "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('/') }}|{{ "
     "msgs|rejectattr('role', 'equalto', 'user')|list|length }}|{{ items|select('odd')|list }}|{{ "
     "items|reject('odd')|list }}|{{ ['a', 'b']|map('upper')|list }}",
     "Hi/Bye|2|[3, 1]|[2]|['A', 'B']"},
    {"Filters",
     "{{ '3'|int + 1 }}|{{ '2.5'|float }}|{{ 'x'|int }}|{{ 3.7|int }}|{{ -3|abs }}|{{ "
     "2.567|round(2) }}|{{ 2.5|round }}",
     "4|2.5|0|3|3|2.57|2.0"},
    {"Filters",
     "{{ 'a\\nb'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'abc'|center(7) }}|{{ 'long text "
     "here'|truncate(9) }}|{{ 'a b c'|wordcount }}",
     "a\n  b|  a\n  b|  abc  |long text here|3"},
    {"Filters",
     "{{ '%s is %d'|format('n', 3) }}|{{ '%.2f' % 3.14159 }}|{{ '%-4s|' % 'ab' }}|{{ '{} and "
     "{}'.format('a', 'b') }}",
     "n is 3|3.14|ab  ||a and b"},
    {"Filters",
     "{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ '<&>'|e }}|{{ d|attr('a') }}|{{ [{'g': 'x'}, {'g': "
     "'y'}, {'g': 'x'}]|groupby('g')|map('first')|list }}",
     "[[1, 2], [3, 4], [5]]|&lt;&amp;&gt;||['x', 'y']"},
    {"ToJson",
     "{{ d|tojson }}|{{ 'é\"\\n'|tojson }}|{{ [1, 2.5, none, true]|tojson }}|{{ {'a': "
     "[]}|tojson(indent=2) }}|{{ {'z': 1, 'a': 2}|tojson(sort_keys=true) }}",
     "{\"b\": 2, \"a\": 1}|\"é\\\"\\n\"|[1, 2.5, null, true]|{\n  \"a\": []\n}|{\"a\": 2, \"z\": "
     "1}"},
    {"ToJson",
     "{{ msgs[1]|tojson(indent=4) }}|{{ 'ü'|tojson(ensure_ascii=true) }}|{{ {'a': "
     "1}|tojson(separators=(',', ':')) }}",
     "{\n    \"role\": \"user\",\n    \"content\": \"Hi\"\n}|\"\\u00fc\"|{\"a\":1}"},
    {"Methods",
     "{{ ' x '.strip() }}|{{ 'xyx'.strip('x') }}|{{ '\\nab'.lstrip('\\n') }}|{{ 'ab\\n'.rstrip() "
     "}}|{{ 'a,b,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ "
     "'a,b,c'.rsplit(',', 1) }}",
     "x|y|ab|ab|['a', 'b', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']"},
    {"Methods",
     "{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'hello world'.title() "
     "}}|{{ 'Hi'.upper() }}|{{ 'Hi'.lower() }}|{{ 'abcabc'.replace('b', '') }}|{{ 'abc'.find('c') "
     "}}|{{ 'aXbXc'.count('X') }}",
     "True|True|Hello World|HI|hi|acac|2|2"},
    {"Methods",
     "{{ '-'.join(['a', 'b']) }}|{{ 'ab'.center(6, '*') }}|{{ '7'.zfill(3) }}|{{ "
     "'k=v'.partition('=') }}|{{ 'abc'.isalpha() }}|{{ '12'.isdigit() }}|{{ 'a\\nb'.splitlines() "
     "}}|{{ 'xab'.removeprefix('x') }}",
     "a-b|**ab**|007|('k', '=', 'v')|True|True|['a', 'b']|ab"},
    {"Methods",
     "{{ items.count(1) }}|{{ items.index(2) }}|{{ (msgs|first).get('role') }}|{{ d.items()|list "
     "}}",
     "1|2|system|[('b', 2), ('a', 1)]"},
    {"Globals",
     "{{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ range(3, 0, -1)|list }}|{{ dict(a=1, b=2) "
     "}}|{{ namespace(a=1).a }}",
     "[0, 1, 2]|[1, 3, 5]|[3, 2, 1]|{'a': 1, 'b': 2}|1"},
    {"Globals",
     "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}|{{ "
     "strftime_now('%Y-%m-%dT%H:%M:%S %a %A %j') }}",
     "26 Jul 2026|July 26, 2026|2026-07-26T12:00:00 Sun Sunday 207"},
    {"Undefined",
     "[{{ zz }}]|{{ zz|length }}|{{ zz|default('d') }}|{% for x in zz %}x{% endfor %}|{{ 'a' in zz "
     "}}|{{ zz is defined }}|{{ not zz }}|{{ zz ~ 'cat' }}|{{ d.zz }}|{{ none.attr }}",
     "[]|0|d||False|False|True|cat||"},
};

nlohmann::ordered_json Variables() {
  return nlohmann::ordered_json::parse(R"({
    "name": "Ann", "n": 3, "items": [3, 1, 2], "d": {"b": 2, "a": 1},
    "msgs": [{"role": "system", "content": " sys \n"}, {"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Bye"}]})");
}

RenderOptions FixedClock() {
  RenderOptions o;
  o.now = CivilTime{2026, 7, 26, 12, 0, 0};
  return o;
}

TEST(JinjaConstructs, RenderAsJinja2Does) {
  const auto vars = Variables();
  for (const ConstructCase& c : kCases) {
    auto t = Template::Parse(c.source);
    ASSERT_TRUE(t.ok()) << c.group << ": " << c.source << "\n" << t.status().ToString();
    auto r = t->Render(vars, FixedClock());
    ASSERT_TRUE(r.ok()) << c.group << ": " << c.source << "\n" << r.status().ToString();
    EXPECT_EQ(r->text, c.expected) << c.group << ": " << c.source;
  }
}

}  // namespace
}  // namespace pagoda::jinja
