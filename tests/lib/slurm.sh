# Shared by the test clusters (sourced).
# slurm_conf_test_cluster: the slurm.conf lines every test cluster shares (the
# real one-node Slurm of tests/cluster/slurm_cluster.sh and the simulated nodes of
# tests/cluster/lib.sh): no cgroups, accounting or job completion records,
# MpiDefault=none (Slurm's own default: the job script chooses the plugin),
# cores as the unit, a node that comes back returns to service.
slurm_conf_test_cluster() {
  cat <<'EOF'
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
EOF
}
