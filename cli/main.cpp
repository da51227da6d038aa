// fp8kit command-line tool: quantize, dequantize, inspect, demo.
#include <cstdio>

int main() { return 0; }
