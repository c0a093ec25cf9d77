/* What the dynamic loader put in this process beside ferry (loader.c). */
#ifndef FERRY_CORE_LOADER_H
#define FERRY_CORE_LOADER_H

/* says, one line each, which driver libraries not ferry's are loaded; at
   init, before ferry loads one itself for a vGPU in this process */
void ferry_loader_check(void);

#endif
