# --- The pull store (store_mode = "pull", iteration 7) ---------------------------
#
# store-inc-counter as a long-running puller: a Cloud Run service of exactly one instance that pulls
# visits in batches from its subscription (pubsub.tf, then a pull subscription) and commits each batch
# in one Firestore transaction. Push mode (iterations 0-6) creates nothing in this file.

locals {
  store = var.functions["store-inc-counter"]

  # Instance-based billing needs at least 1 vCPU: "If you use less than 1 CPU ... The billing settings
  # must be set to request-based billing" (https://cloud.google.com/run/docs/configuring/services/cpu).
  # So the puller's cpu defaults to "1" (the lifecycle precondition below refuses a smaller one).
  puller_cpu = coalesce(local.store.cpu, "1")

  # The source zip the functions deploy, and where the puller's image goes: the kit's own repository,
  # tagged with the zip's content hash, so new source means a new image and a new revision.
  puller_source = "gs://${google_storage_bucket.source.name}/${google_storage_bucket_object.functions.name}"
  puller_image  = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.functions.repository_id}/${local.deployed_names["store-inc-counter"]}:${data.archive_file.functions.output_md5}"

  # The puller's build, run as the build account (terraform_data.puller_image below). The account may use
  # our source bucket (Storage Object Admin, iam.tf), Cloud Logging (Logs Writer) and our image repository,
  # nothing else, so the build keeps to them:
  # - the source: gcloud copies it before the build ("A directory in Google Cloud Storage to copy the source
  #   used for staging the build", --gcs-source-staging-dir), by default into gs://PROJECT_cloudbuild/source,
  #   or gs://PROJECT_REGION_cloudbuild/source with --default-buckets-behavior=regional-user-owned-bucket
  #   (gcloud's command_lib/builds/submit_util.py SetSource, staging_bucket_util.py), which the build
  #   account could not read: staged here, in our own bucket, under staging/;
  # - the logs: a build run as a service account of ours must send its logs to Cloud Logging or to a bucket of
  #   ours, not the default one (https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts);
  #   a regional user-owned logs bucket needs an account that may "create and write to GCS buckets in the
  #   build project" (Cloud Build's BuildOptions.DefaultLogsBucketBehavior), and logs in a bucket of ours
  #   (--gcs-log-dir) the Storage Admin role on it (https://cloud.google.com/build/docs/securing-builds/store-view-build-logs):
  #   CLOUD_LOGGING_ONLY needs only the Logs Writer role it has ("for storing build logs in Cloud Logging").
  # - the Python: the functions' own (python312). Google's buildpacks take it from GOOGLE_PYTHON_VERSION
  #   (e.g. "3.12.x", https://cloud.google.com/docs/buildpacks/python), on a builder that has it: the
  #   google-22 builder has 3.10 to 3.13, the google-24 one (the latest tag's in Google's newest docs) 3.13
  #   and later (https://cloud.google.com/docs/buildpacks/builders); google-22 is also python312's stack
  #   (python_base_image, main.tf). GOOGLE_FUNCTION_TARGET makes the Python buildpack serve the entry point
  #   with functions-framework (https://cloud.google.com/docs/buildpacks/build-function).
  # `gcloud builds submit --pack` cannot say all this: its --pack takes one env (keys image, builder, env:
  # flags.py AddConfigFlags), passed to `pack build --env` whole, and pack takes one VAR=VALUE per --env; nor
  # can any of its flags set the logging mode. So the build is gcloud's own --pack build (submit_util.py
  # _SetBuildSteps: a gcr.io/k8s-skaffold/pack step, `pack build IMAGE --network cloudbuild --env ... --builder
  # ...`, the image in images) in a build config of ours, given on standard input.
  puller_builder        = "gcr.io/buildpacks/builder:google-22"
  puller_python_version = format("%s.%s.x", substr(local.python_runtime, 6, 1), substr(local.python_runtime, 7, -1))
  puller_staging_dir    = "gs://${google_storage_bucket.source.name}/staging"
  puller_build = {
    steps = [{
      name       = "gcr.io/k8s-skaffold/pack"
      entrypoint = "pack"
      args = [
        "build", local.puller_image, "--network", "cloudbuild",
        "--env", "GOOGLE_FUNCTION_TARGET=${local.entry_points["store-inc-counter"]}",
        "--env", "GOOGLE_PYTHON_VERSION=${local.puller_python_version}",
        "--builder", local.puller_builder,
      ]
    }]
    images  = [local.puller_image]
    options = { logging = "CLOUD_LOGGING_ONLY" }
  }
}

# Cloud Run does not build a service's image from its build_config: "The build_config block will not
# actually kick off a build ... [it] was added to support dual edit between Cloud Run service resources
# and the Cloud Run Function that generated these services"
# (https://github.com/GoogleCloudPlatform/terraform-google-cloud-run/pull/398; provider issues
# https://github.com/hashicorp/terraform-provider-google/issues/22263 and /23057: the revision fails on
# a missing image). Terraform must therefore reference a built image ("Cloud Run resources that are
# managed using YAML or Terraform reference a container image URL. The function code ... need[s] to be
# built into a container image", https://cloud.google.com/run/docs/building/functions): Cloud Build
# builds it here with Google's buildpacks, as Cloud Run functions do, from the same source zip, as the
# build account. Like build_grants_wait it runs a local command: gcloud, which the kit's runner needs
# anyway. Replaced (rebuilt) only when the image's name, i.e. the source, changes.
resource "terraform_data" "puller_image" {
  count = local.pull ? 1 : 0

  triggers_replace = [local.puller_image]
  # The whole command is here, where plans and tests see it (a provisioner may only read self).
  input = {
    image        = local.puller_image
    build_config = jsonencode(local.puller_build)
    command = join(" ", [
      "printf '%s' '${jsonencode(local.puller_build)}' |",
      "gcloud builds submit '${local.puller_source}' --config=/dev/stdin",
      "--project='${var.project_id}' --region='${var.region}'",
      "--service-account='${google_service_account.build.id}' --gcs-source-staging-dir='${local.puller_staging_dir}'",
    ])
  }

  provisioner "local-exec" {
    command = self.input.command
  }

  depends_on = [
    google_project_service.this,
    google_project_iam_member.this,
    google_storage_bucket_iam_member.build_source_objects,
    google_artifact_registry_repository_iam_member.build_pushes_images,
    terraform_data.build_grants_wait,
  ]
}

resource "google_cloud_run_v2_service" "store_puller" {
  count = local.pull ? 1 : 0

  project     = var.project_id
  name        = local.deployed_names["store-inc-counter"]
  location    = var.region
  description = "Visit counter: store-inc-counter (pull mode)"
  # Reached by nobody: Pub/Sub is pulled, not pushing. No invoker is granted (iam.tf), and the startup
  # probe below is not an invocation.
  ingress = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  # `terraform destroy` removes it like the functions.
  deletion_protection = false

  # How the image was made, in the fields a Cloud Run function records (the console shows it as a
  # function); the build itself is terraform_data.puller_image's.
  build_config {
    source_location = local.puller_source
    function_target = local.entry_points["store-inc-counter"]
    image_uri       = local.puller_image
    base_image      = local.python_base_image
    service_account = google_service_account.build.id
  }

  template {
    service_account                  = google_service_account.function["store-inc-counter"].email
    max_instance_request_concurrency = local.store.concurrency
    timeout                          = "${local.store.timeout_seconds}s"

    # One writer, running without requests (variables.tf's store_mode validation holds both at 1).
    scaling {
      min_instance_count = local.store.min_instances
      max_instance_count = local.store.max_instances
    }

    containers {
      image = local.puller_image

      resources {
        # Instance-based billing: the CPU stays allocated between requests, which the puller's threads
        # need (with cpu_idle = true they would be throttled to almost nothing outside a request).
        cpu_idle = false
        limits = {
          cpu    = local.puller_cpu
          memory = local.store.memory
        }
      }

      dynamic "env" {
        for_each = local.function_environment["store-inc-counter"]
        content {
          name  = env.key
          value = env.value
        }
      }

      # GET / answers the puller's status and, as a fallback, starts its threads: the instance counts as
      # started once the puller runs. Up to 2 minutes for the imports and the first lease.
      startup_probe {
        period_seconds    = 5
        timeout_seconds   = 3
        failure_threshold = 24
        http_get {
          path = "/"
        }
      }
    }
  }

  lifecycle {
    precondition {
      condition     = try(tonumber(local.puller_cpu) >= 1, false)
      error_message = "With store_mode \"pull\", store-inc-counter's cpu must be at least \"1\" (Cloud Run bills an always-allocated CPU by instance, which needs 1 vCPU or more)."
    }
  }

  # The image first; and its grant to pull, since the instance starts pulling as soon as it starts.
  depends_on = [
    google_project_service.this,
    terraform_data.puller_image,
    google_pubsub_subscription_iam_member.store_pulls,
  ]
}

# The puller pulls, acknowledges and nacks (modifyAckDeadline) on its own subscription, and nothing else.
resource "google_pubsub_subscription_iam_member" "store_pulls" {
  count = local.pull ? 1 : 0

  project      = var.project_id
  subscription = google_pubsub_subscription.store_inc_counter.name
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.function["store-inc-counter"].member
}
