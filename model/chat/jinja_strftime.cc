#include "model/chat/jinja_strftime.h"

#include <locale.h>

#include <chrono>
#include <ctime>
#include <string>

namespace pagoda::jinja {
namespace {

constexpr size_t kMaxFormat = 1000;

bool ValidDate(const CivilTime& t) {
  const std::chrono::year_month_day ymd{std::chrono::year(t.year),
                                        std::chrono::month(static_cast<unsigned>(t.month)),
                                        std::chrono::day(static_cast<unsigned>(t.day))};
  return ymd.ok() && t.year >= 1 && t.year <= 9999 && t.hour >= 0 && t.hour < 24 && t.minute >= 0 &&
         t.minute < 60 && t.second >= 0 && t.second < 62;
}

std::tm ToTm(const CivilTime& t) {
  using namespace std::chrono;
  const year_month_day ymd{year(t.year), month(static_cast<unsigned>(t.month)),
                           day(static_cast<unsigned>(t.day))};
  const sys_days days{ymd};
  const year_month_day jan1{year(t.year), January, day(1)};
  std::tm tm{};
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.month - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.minute;
  tm.tm_sec = t.second;
  tm.tm_wday = static_cast<int>(weekday(days).c_encoding());
  tm.tm_yday = static_cast<int>((days - sys_days{jan1}).count());
  tm.tm_isdst = -1;
  tm.tm_zone = "";
  return tm;
}

// Formats one conversion ("%d", "%-d", ...) with the C locale.
std::string FormatOne(const std::tm& tm, const std::string& spec, locale_t c_locale) {
  char buf[256];
  const size_t n = strftime_l(buf, sizeof(buf), spec.c_str(), &tm, c_locale);
  return std::string(buf, n);
}

}  // namespace

Result<CivilTime> ParseCivilTime(std::string_view text) {
  CivilTime t;
  char sep = 0;
  const std::string s(text);
  int consumed = 0;
  const int n = std::sscanf(s.c_str(), "%4d-%2d-%2d%n%c%2d:%2d:%2d", &t.year, &t.month, &t.day,
                            &consumed, &sep, &t.hour, &t.minute, &t.second);
  const bool date_only = n == 3 && consumed == static_cast<int>(s.size());
  const bool ok = date_only || ((n == 6 || n == 7) && (sep == 'T' || sep == ' '));
  if (!ok || !ValidDate(t)) {
    return InvalidArgument("invalid time '" + s + "': expected YYYY-MM-DDTHH:MM[:SS]");
  }
  return t;
}

Result<std::string> Strftime(const CivilTime& t, std::string_view format) {
  if (format.size() > kMaxFormat) return InvalidArgument("strftime format too long");
  if (!ValidDate(t)) return InvalidArgument("invalid date for strftime_now");
  const std::tm tm = ToTm(t);
  locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  if (c_locale == static_cast<locale_t>(0)) return Internal("cannot create the C locale");
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    size_t j = i + 1;
    while (j < format.size() &&
           std::string_view("-_0^#").find(format[j]) != std::string_view::npos) {
      ++j;
    }
    if (j >= format.size()) {
      out.append(format.substr(i));
      break;
    }
    const char conv = format[j];
    if (conv == 'z' || conv == 'Z') {
      // A naive datetime has no zone: Python prints nothing.
    } else {
      out += FormatOne(tm, std::string(format.substr(i, j - i + 1)), c_locale);
    }
    i = j;
  }
  freelocale(c_locale);
  return out;
}

}  // namespace pagoda::jinja
