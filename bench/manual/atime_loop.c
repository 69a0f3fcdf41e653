/* The access-time cost loop of docs/SEMANTICS.md ("Access times"): in DIR,
 * N times write a file of SIZE bytes and read it back through new opens,
 * then N warm open+read+close, then N preads of 4 KiB on one descriptor;
 * microseconds per iteration of each. Run beside tmpfs in the same run:
 *   cc -O2 -o /tmp/atime_loop bench/manual/atime_loop.c
 *   /tmp/atime_loop DIR 5000 8192
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int c,char**v){const char*dir=v[1];int n=atoi(v[2]);size_t sz=atol(v[3]);char p[4096];char*buf=malloc(sz);memset(buf,'a',sz);
 snprintf(p,sizeof p,"%s/atf",dir);
 /* write then read */
 double t=now();
 for(int i=0;i<n;i++){int fd=open(p,O_WRONLY|O_CREAT|O_TRUNC,0644);if(write(fd,buf,sz)!=(ssize_t)sz){perror("w");return 1;}close(fd);
   fd=open(p,O_RDONLY);if(read(fd,buf,sz)!=(ssize_t)sz){perror("r");return 1;}close(fd);}
 double wr=(now()-t)/n*1e6;
 t=now();
 for(int i=0;i<n;i++){int fd=open(p,O_RDONLY);if(read(fd,buf,sz)!=(ssize_t)sz){perror("r");return 1;}close(fd);}
 double rr=(now()-t)/n*1e6;
 int fd=open(p,O_RDONLY);t=now();
 for(int i=0;i<n;i++){if(pread(fd,buf,sz<4096?sz:4096,0)<=0){perror("p");return 1;}}
 double pr=(now()-t)/n*1e6;close(fd);
 printf("write+read %.2f  open+read+close %.2f  pread %.2f  us\n",wr,rr,pr);return 0;}
