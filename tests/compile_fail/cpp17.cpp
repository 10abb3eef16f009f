// Compiled with -std=c++17: must stop at once with the C++20 message.
#include <fusion/fusion.hpp>
int main() {}
