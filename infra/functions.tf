# --- Functions -----------------------------------------------------------------

resource "google_cloudfunctions2_function" "this" {
  # checkov:skip=CKV_GCP_124: serve-page, get-counter and inc-counter are the public website (ALLOW_ALL, or ALLOW_INTERNAL_AND_GCLB behind edge_protection's load balancer); store-inc-counter is ALLOW_INTERNAL_ONLY.
  # In pull mode store-inc-counter is the Cloud Run service in pull.tf instead.
  for_each = local.deployed_functions

  project     = var.project_id
  name        = local.deployed_names[each.key]
  location    = var.region
  description = "Visit counter: ${each.key}"

  build_config {
    runtime     = local.python_runtime
    entry_point = local.entry_points[each.key]
    # Our own build account: new projects' default build account may lack the roles.
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.functions.name
      }
    }
  }

  service_config {
    max_instance_count               = each.value.max_instances
    min_instance_count               = each.value.min_instances
    max_instance_request_concurrency = each.value.concurrency
    available_memory                 = each.value.memory
    available_cpu                    = local.cpu[each.key]
    timeout_seconds                  = each.value.timeout_seconds
    environment_variables            = local.function_environment[each.key]
    service_account_email            = google_service_account.function[each.key].email
    all_traffic_on_latest_revision   = true
    # Pub/Sub's pushes from the same project to the run.app URL count as internal traffic.
    # Behind edge_protection's load balancer the public functions take only its traffic (and
    # internal), so nothing reaches them around its rate limit.
    ingress_settings = !contains(local.public_functions, each.key) ? "ALLOW_INTERNAL_ONLY" : (local.edge ? "ALLOW_INTERNAL_AND_GCLB" : "ALLOW_ALL")
  }

  lifecycle {
    precondition {
      condition     = toset(keys(local.catalogue.functions)) == toset(keys(var.functions))
      error_message = "functions/catalogue.json and the functions variable must name the same functions."
    }
  }

  # The build runs as the build account: its roles first, then the wait for them to propagate
  # (terraform_data.build_grants_wait in build.tf; tests/unit/test_infra_graph.py checks this edge).
  depends_on = [
    google_project_service.this,
    google_project_iam_member.this,
    google_storage_bucket_iam_member.build_source_objects,
    google_artifact_registry_repository_iam_member.build_pushes_images,
    terraform_data.build_grants_wait,
  ]
}
