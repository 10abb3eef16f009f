// SPDX-License-Identifier: Apache-2.0
#include "fusion/version.hpp"

namespace fusion {

Version version() { return header_version; }  // the headers the library was compiled with

}  // namespace fusion
