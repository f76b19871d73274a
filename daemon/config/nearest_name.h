// NearestName: the known name closest to a misspelt one, for "did you mean"
// hints on unknown configuration keys and flags.
//
// Pure function; any thread.
#pragma once

#include <string>
#include <vector>

namespace perld::config {

// The first of `known` whose case-insensitive edit distance (Levenshtein:
// insert, delete, substitute) to `name` is smallest and <= `max_distance`,
// or "" when none is that close.
std::string NearestName(const std::string& name, const std::vector<std::string>& known,
                        int max_distance = 2);

}  // namespace perld::config
