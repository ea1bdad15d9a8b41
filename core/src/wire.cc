// wire.h is header-only; this file keeps the explicit source list honest.
#include "wire.h"
