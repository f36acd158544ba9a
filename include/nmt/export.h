// NMT_API marks what the shared library exports: the public API alone.
#pragma once

#if defined(NMT_BUILDING_RUNTIME)
#define NMT_API __attribute__((visibility("default")))
#else
#define NMT_API
#endif
