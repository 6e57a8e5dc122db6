/* A library linked to the table driver (-lfake) and opened by app_local.c with RTLD_LOCAL, as Python
 * opens an extension module (Triton's cuda_utils is one): the driver is then in this library's local
 * scope only, while its calls by name bind to the interposer's global exports. */
typedef void *H;
int cuModuleLoadData(H *module, const void *image);
int cuGraphInstantiateWithFlags(H *exec, H graph, unsigned long long flags);
int cuGraphLaunch(H exec, H stream);
int cuGraphExecDestroy(H exec);

/* Loads `image`, instantiates the driver's graph, launches it `n` times: 0, or the first failing call's
 * result (negated call number in the high bits). */
int user_run(const void *image, int n) {
  H module = 0, exec = 0;
  int rc;
  if ((rc = cuModuleLoadData(&module, image)) != 0) return 1000 + rc;
  if ((rc = cuGraphInstantiateWithFlags(&exec, (H)0x9000, 0)) != 0) return 2000 + rc;
  for (int i = 0; i < n; i++)
    if ((rc = cuGraphLaunch(exec, 0)) != 0) return 3000 + rc;
  if ((rc = cuGraphExecDestroy(exec)) != 0) return 4000 + rc;
  return 0;
}
