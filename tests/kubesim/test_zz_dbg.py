from tests.kubesim.test_controllers_jobs import *  # noqa


async def test_dbg(kube, clock):
    await kube.batch.create_namespaced_job(
        NS, gpu_job("flaky", queue=None, gpus=1, backoffLimit=2, env={"KUBESIM_EXIT_CODE": "1"})
    )
    for attempt in range(1, 4):

        async def attempt_running(n: int = attempt) -> bool:
            pods = await kube.pods_of("flaky")
            print(n, clock.now(), [(p.metadata.name, p.status.phase) for p in pods])
            return len(pods) == n and any(p.status.phase == "Running" for p in pods)

        await wait_until(attempt_running, message=f"attempt {attempt} running", timeout=1)
        clock.advance(1)
