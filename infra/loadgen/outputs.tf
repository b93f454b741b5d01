output "bucket" {
  description = "Name of the fleet's bucket: run/ (the staged files), results/ (the master's output and exit-code), logs/ (the VMs' boot and Locust logs)."
  value       = google_storage_bucket.run.name
}

output "master_name" {
  description = "Name of the Locust master VM."
  value       = google_compute_instance.master.name
}

output "master_internal_ip" {
  description = "The master's fixed internal address, which the workers connect to."
  value       = google_compute_address.master.address
}

output "zone" {
  description = "Zone of the master and the workers."
  value       = local.zone
}

output "service_account_email" {
  description = "Email of the fleet's service account (the identity of its ID tokens when the functions need authentication)."
  value       = google_service_account.fleet.email
}

output "expect_workers" {
  description = "Locust worker processes the master waits for: workers x processes_per_worker."
  value       = local.expect_workers
}

output "worker_names" {
  description = "Names of the worker VMs (each deletes itself when its part of the run is over)."
  value       = sort([for w in google_compute_instance.worker : w.name])
}

output "max_run_seconds" {
  description = "Compute Engine deletes each VM at the latest this long after it starts: (boot_minutes + run_minutes + 10) x 60."
  value       = local.max_run_seconds
}

output "ssh_master" {
  description = "Command that opens a shell on the master through Identity-Aware Proxy (OS Login)."
  value       = "gcloud compute ssh ${google_compute_instance.master.name} --zone ${local.zone} --project ${var.project_id} --tunnel-through-iap"
}
